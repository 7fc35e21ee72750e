"""CNN: a diffusion U-Net residual block: GroupNorm(32) -> SiLU -> conv3x3, plus the projected timestep
embedding, GroupNorm(32) -> SiLU -> dropout -> conv3x3, plus the input; 256 channels on 16 x 256 x 64 x 64
bfloat16 latents (34 MB in and out) with a 16 x 512 timestep embedding.

Group norms reduce over 8 channels x 4096 pixels each; the embedding is broadcast over the image.
"""

import torch
import torch.nn as nn

CATEGORY = "cnn"

BATCH = 16
CHANNELS = 256
SIZE = 64
TIME_EMBED = 512
GROUPS = 32


class Model(nn.Module):
    def __init__(self, channels, time_embed_dim, groups, dropout):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, channels, eps=1e-6)
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.time_emb_proj = nn.Linear(time_embed_dim, channels)
        self.norm2 = nn.GroupNorm(groups, channels, eps=1e-6)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
        self.nonlinearity = nn.SiLU()
        with torch.no_grad():
            for norm in (self.norm1, self.norm2):
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.uniform_(-0.5, 0.5)
        self.to(torch.bfloat16)

    def forward(self, input_tensor, temb):
        hidden_states = input_tensor
        hidden_states = self.norm1(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.conv1(hidden_states)

        temb = self.time_emb_proj(self.nonlinearity(temb))[:, :, None, None]
        hidden_states = hidden_states + temb

        hidden_states = self.norm2(hidden_states)
        hidden_states = self.nonlinearity(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.conv2(hidden_states)

        return input_tensor + hidden_states


def get_inputs():
    return [
        torch.randn(BATCH, CHANNELS, SIZE, SIZE, dtype=torch.bfloat16),
        torch.randn(BATCH, TIME_EMBED, dtype=torch.bfloat16),
    ]


def get_init_inputs():
    return [CHANNELS, TIME_EMBED, GROUPS, 0.1]
