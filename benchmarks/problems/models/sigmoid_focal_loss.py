"""Loss: the sigmoid focal loss of dense detectors (RetinaNet): BCE with logits, down-weighted by (1 - p_t)^gamma
and balanced by alpha, summed and divided by the number of positive anchors; 16 images x 16384 anchors x 80 classes
of bfloat16 logits and one-hot targets (42 MB each; 84 MB in, a scalar out).

About ten elementwise ops over 21M elements that eager runs as separate passes, then one sum.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "loss"

BATCH = 16
ANCHORS = 16384
CLASSES = 80


class Model(nn.Module):
    def __init__(self, alpha, gamma):
        super().__init__()
        self.alpha = alpha
        self.gamma = gamma

    def forward(self, inputs, targets):
        prob = inputs.sigmoid()
        bce = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
        positive = targets == 1
        p_t = torch.where(positive, prob, 1 - prob)
        alpha_t = torch.where(positive, self.alpha, 1 - self.alpha)
        focal = alpha_t * (1 - p_t).pow(self.gamma) * bce
        return focal.sum() / targets.sum().clamp(min=1.0)

def get_inputs():
    logits = torch.randn(BATCH, ANCHORS, CLASSES, dtype=torch.bfloat16) * 2 - 4
    labels = torch.randint(0, CLASSES, (BATCH, ANCHORS))
    positive = torch.rand(BATCH, ANCHORS) < 0.02
    targets = torch.zeros(BATCH, ANCHORS, CLASSES, dtype=torch.bfloat16)
    targets.scatter_(2, labels.unsqueeze(-1), positive.unsqueeze(-1).to(torch.bfloat16))
    return [logits, targets]


def get_init_inputs():
    return [0.25, 2.0]
