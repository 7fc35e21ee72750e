"""GEMM: the BLAS-style update alpha * (A @ B) + beta * C with capitalised forward parameters, as numerical code
writes it; 4096 x 4096 x 4096 float32 (67 MB per matrix; 201 MB in, 67 MB out).

137 GFLOP: cuBLAS SGEMM speed unless TF32 is allowed; the scaled add of C is the epilogue.
"""

import torch
import torch.nn as nn

CATEGORY = "gemm"

M = 4096
K = 4096
N = 4096


class Model(nn.Module):
    def __init__(self, alpha, beta):
        super().__init__()
        self.alpha = alpha
        self.beta = beta

    def forward(self, A, B, C):
        return self.alpha * torch.matmul(A, B) + self.beta * C


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(K, N)
    C = torch.randn(M, N)
    return [A, B, C]


def get_init_inputs():
    return [0.5, 2.0]
