"""Transformer: a ViT-B/16 input stage: Conv2d(3 -> 768, 16x16, stride 16) patchify, flatten to tokens, prepend
the class token, add learned position embeddings, dropout; 64 x 3 x 224 x 224 float32 images in (39 MB),
64 x 197 x 768 tokens out (39 MB).

The convolution is a GEMM over non-overlapping patches; flatten/transpose/cat/add are copies eager makes.
"""

import torch
import torch.nn as nn

CATEGORY = "transformer"

BATCH = 64
IMAGE = 224
PATCH = 16
HIDDEN = 768


class Model(nn.Module):
    def __init__(self, image_size, patch_size, hidden_dim, dropout):
        super().__init__()
        num_patches = (image_size // patch_size) ** 2
        self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        self.class_token = nn.Parameter(torch.randn(1, 1, hidden_dim) * 0.02)
        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches + 1, hidden_dim) * 0.02)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        n = x.shape[0]
        x = self.conv_proj(x)  # (n, hidden, h/p, w/p)
        x = x.flatten(2).transpose(1, 2)  # (n, patches, hidden)
        batch_class_token = self.class_token.expand(n, -1, -1)
        x = torch.cat([batch_class_token, x], dim=1)
        return self.dropout(x + self.pos_embedding)


def get_inputs():
    return [torch.randn(BATCH, 3, IMAGE, IMAGE)]


def get_init_inputs():
    return [IMAGE, PATCH, HIDDEN, 0.0]
