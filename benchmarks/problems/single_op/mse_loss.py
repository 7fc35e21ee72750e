"""Single op: mean squared error between two 8192 x 2048 float32 tensors (64 MB each), reduced to one scalar.

A full reduction: two reads, one tiny write; the reduction across the whole tensor needs a second stage.
"""

import torch
import torch.nn as nn

CATEGORY = "single_op"

ROWS = 8192
COLUMNS = 2048


class Model(nn.Module):
    def forward(self, prediction, target):
        return nn.functional.mse_loss(prediction, target)


def get_inputs():
    return [torch.randn(ROWS, COLUMNS), torch.randn(ROWS, COLUMNS)]


def get_init_inputs():
    return []
