"""Synthetic program (CSP-DAG level 6, seed 4406060649782599564): adaptive_avg_pool2d -> adaptive_max_pool2d -> relu -> permute -> batch_norm -> hardswish."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.batch_norm1 = nn.BatchNorm2d(2)

    def forward(self, x):
        h1 = F.adaptive_avg_pool2d(x, 1)
        h2 = F.adaptive_max_pool2d(h1, 1)
        h3 = torch.relu(h2)
        h4 = h3.permute(1, 3, 0, 2)
        h5 = F.batch_norm(x, self.batch_norm1.running_mean, self.batch_norm1.running_var, self.batch_norm1.weight, self.batch_norm1.bias, training=False)
        h6 = F.hardswish(h4)
        return h5, h6


def get_inputs():
    x = torch.randn(10, 2, 6, 29)
    return [x]


def get_init_inputs():
    return []
