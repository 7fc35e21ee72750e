"""Single op: class-weighted cross-entropy over 4096 rows of 8192 float16 logits (64 MB), as in an
imbalanced classifier; the class weights are a buffer, which also fixes the class count.

A row reduction (log-sum-exp) plus a gather and a weighted mean to one scalar.
"""

import torch
import torch.nn as nn

CATEGORY = "single_op"

ROWS = 4096
CLASSES = 8192


class Model(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.register_buffer("class_weight", torch.rand(classes, dtype=torch.float16) + 0.5)

    def forward(self, logits, target):
        return nn.functional.cross_entropy(logits, target, weight=self.class_weight)


def get_inputs():
    return [torch.randn(ROWS, CLASSES, dtype=torch.float16), torch.randint(0, CLASSES, (ROWS,))]


def get_init_inputs():
    return [CLASSES]
