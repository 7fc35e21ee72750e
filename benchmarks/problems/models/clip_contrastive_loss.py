"""Loss: CLIP's symmetric contrastive loss: L2-normalise image and text embeddings, logits = exp(logit_scale) *
image @ text^T, cross-entropy against the diagonal in both directions, averaged; 8192 pairs x 768 float32
(25 MB per input, a 268 MB logit matrix in eager, a scalar out).

A GEMM whose output is consumed by row and by column softmaxes; the labels are an arange built in forward.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "loss"

PAIRS = 8192
EMBED_DIM = 768


class Model(nn.Module):
    def __init__(self, init_temperature):
        super().__init__()
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / init_temperature)))

    def forward(self, image_features, text_features):
        image_features = F.normalize(image_features, dim=-1)
        text_features = F.normalize(text_features, dim=-1)
        logit_scale = self.logit_scale.exp()
        logits_per_image = logit_scale * image_features @ text_features.t()
        logits_per_text = logits_per_image.t()
        labels = torch.arange(logits_per_image.shape[0], device=logits_per_image.device, dtype=torch.long)
        return (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2


def get_inputs():
    return [torch.randn(PAIRS, EMBED_DIM), torch.randn(PAIRS, EMBED_DIM)]


def get_init_inputs():
    return [0.07]
