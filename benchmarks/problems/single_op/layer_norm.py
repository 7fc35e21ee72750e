"""Single op: LayerNorm over 4096 features of 8192 tokens in bfloat16 (64 MB), with learned weight and bias.

Statistics are accumulated in float32 by PyTorch; memory-bound (one read, one write).
"""

import torch
import torch.nn as nn

CATEGORY = "single_op"

TOKENS = 8192
HIDDEN = 4096


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden).to(torch.bfloat16)
        with torch.no_grad():  # non-trivial affine parameters, so a kernel that ignores them fails
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN]
