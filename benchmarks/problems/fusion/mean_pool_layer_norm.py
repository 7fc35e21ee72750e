"""Fusion: a sentence-embedding head, mean over 512 tokens then LayerNorm over 1024 features, for a batch of 32
in bfloat16 (34 MB in, 64 KB out).

Dominated by reading the input once; eager adds a pass for the pooled tensor and the normalisation.
"""

import torch
import torch.nn as nn

CATEGORY = "fusion"

BATCH = 32
SEQUENCE = 512
HIDDEN = 1024


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden).to(torch.bfloat16)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.norm(x.mean(dim=1))


def get_inputs():
    return [torch.randn(BATCH, SEQUENCE, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN]
