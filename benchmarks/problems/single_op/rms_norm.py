"""Single op: RMSNorm (nn.RMSNorm, as in Llama-style models) over 4096 features of 4096 tokens in float32 (64 MB).

Memory-bound row reduction plus scale by the learned weight.
"""

import torch
import torch.nn as nn

CATEGORY = "single_op"

TOKENS = 4096
HIDDEN = 4096


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.RMSNorm(hidden, eps=1e-6)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
