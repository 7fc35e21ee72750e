"""Single op: exact (erf) GELU over 8192 tokens x 4096 hidden in float16 (64 MB), a transformer MLP's activation.

Memory-bound; the erf is computed in float32 and rounded back to float16.
"""

import torch
import torch.nn as nn

CATEGORY = "single_op"

TOKENS = 8192
HIDDEN = 4096


class Model(nn.Module):
    def forward(self, x):
        return nn.functional.gelu(x)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.float16)]


def get_init_inputs():
    return []
