"""GEMM: a VQ-VAE vector quantiser: squared distances to a 4096-entry codebook through ||x||^2 - 2 x E^T + ||E||^2,
argmin, codebook lookup, commitment loss and the straight-through output; 32768 vectors x 256 float32 (34 MB in
and out), a 4 MB codebook and a 537 MB distance matrix in eager.

A 69 GFLOP GEMM whose epilogue is a row argmin: fused, the distance matrix never reaches memory. A row whose two
nearest codes are within rounding of each other can pick either, so the indices depend on summation order.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "gemm"

VECTORS = 32768
DIM = 256
CODES = 4096


class Model(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, commitment_cost):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, embedding_dim)  # N(0, 1) codes, spread like trained ones
        self.commitment_cost = commitment_cost

    def forward(self, inputs):
        distances = (
            torch.sum(inputs**2, dim=1, keepdim=True)
            + torch.sum(self.embedding.weight**2, dim=1)
            - 2 * torch.matmul(inputs, self.embedding.weight.t())
        )
        encoding_indices = torch.argmin(distances, dim=1)
        quantized = self.embedding(encoding_indices)

        e_latent_loss = F.mse_loss(quantized.detach(), inputs)
        loss = self.commitment_cost * e_latent_loss
        quantized = inputs + (quantized - inputs).detach()
        return quantized, loss, encoding_indices


def get_inputs():
    return [torch.randn(VECTORS, DIM)]


def get_init_inputs():
    return [CODES, DIM, 0.25]
