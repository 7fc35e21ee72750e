"""Network: a small MLP-Mixer classifier: 16x16 patch embedding by a strided convolution, two mixer layers (a token
MLP across the 196 patches applied through transposes, a channel MLP across 512 channels, pre-LayerNorm and
residuals around each), a final LayerNorm, mean over patches and a 1000-way head; 64 x 3 x 224 x 224 float32 images
in (39 MB), 64 x 1000 logits out (26 MB per token activation, 103 MB per channel-MLP hidden).

The token MLP works on the transposed activation: eager materialises each transpose.
"""

import torch
import torch.nn as nn

CATEGORY = "network"

BATCH = 64
IMAGE = 224
PATCH = 16
HIDDEN = 512
TOKEN_MLP = 256
CHANNEL_MLP = 2048
DEPTH = 2
CLASSES = 1000


class MlpBlock(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden_dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_dim, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class MixerBlock(nn.Module):
    def __init__(self, num_patches, hidden_dim, tokens_mlp_dim, channels_mlp_dim):
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden_dim)
        self.token_mixing = MlpBlock(num_patches, tokens_mlp_dim)
        self.norm2 = nn.LayerNorm(hidden_dim)
        self.channel_mixing = MlpBlock(hidden_dim, channels_mlp_dim)

    def forward(self, x):  # x: (batch, patches, channels)
        y = self.norm1(x).transpose(1, 2)
        x = x + self.token_mixing(y).transpose(1, 2)
        return x + self.channel_mixing(self.norm2(x))


class Model(nn.Module):
    def __init__(self, image_size, patch_size, hidden_dim, tokens_mlp_dim, channels_mlp_dim, depth, num_classes):
        super().__init__()
        num_patches = (image_size // patch_size) ** 2
        self.stem = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        self.blocks = nn.ModuleList(
            [MixerBlock(num_patches, hidden_dim, tokens_mlp_dim, channels_mlp_dim) for _ in range(depth)]
        )
        self.pre_head_norm = nn.LayerNorm(hidden_dim)
        self.head = nn.Linear(hidden_dim, num_classes)
        with torch.no_grad():
            for norm in self.modules():
                if isinstance(norm, nn.LayerNorm):
                    norm.weight.uniform_(0.5, 1.5)
                    norm.bias.uniform_(-0.5, 0.5)

    def forward(self, images):
        x = self.stem(images).flatten(2).transpose(1, 2)
        for block in self.blocks:
            x = block(x)
        x = self.pre_head_norm(x)
        return self.head(x.mean(dim=1))


def get_inputs():
    return [torch.randn(BATCH, 3, IMAGE, IMAGE)]


def get_init_inputs():
    return [IMAGE, PATCH, HIDDEN, TOKEN_MLP, CHANNEL_MLP, DEPTH, CLASSES]
