"""Network: a two-layer pre-norm transformer encoder built from PyTorch's own nn.TransformerEncoderLayer
(d_model 1024, 16 heads, feed-forward 4096, GELU, batch_first, norm_first) in nn.TransformerEncoder, with a final
LayerNorm; 16 x 1024 tokens in bfloat16 (34 MB in and out).

About 0.9 TFLOP of GEMM and attention per call. In eval mode without autograd, eager PyTorch takes its fused
"fast path" (torch._transformer_encoder_layer_fwd); export traces the ordinary ops.
"""

import torch
import torch.nn as nn

CATEGORY = "network"

BATCH = 16
SEQUENCE = 1024
D_MODEL = 1024
HEADS = 16
FEEDFORWARD = 4096
LAYERS = 2


class Model(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward, num_layers):
        super().__init__()
        layer = nn.TransformerEncoderLayer(
            d_model,
            nhead,
            dim_feedforward=dim_feedforward,
            dropout=0.1,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(
            layer, num_layers=num_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False
        )
        self.to(torch.bfloat16)

    def forward(self, src):
        return self.encoder(src)


def get_inputs():
    return [torch.randn(BATCH, SEQUENCE, D_MODEL, dtype=torch.bfloat16)]


def get_init_inputs():
    return [D_MODEL, HEADS, FEEDFORWARD, LAYERS]
