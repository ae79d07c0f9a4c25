"""Naive C matmul: the textbook i-j-k triple loop."""

import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <stdint.h>

void matmul_naive(const float* A, const float* B, float* C, int64_t M, int64_t K, int64_t N) {
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
            C[i * N + j] = acc;
        }
}
"""

# Knobs: module-level constants a tuner may rewrite, with the values it may try.
FLAGS = ["-O2"]
KNOBS = {"FLAGS": [["-O2"], ["-O3", "-march=native"]]}

lib = native.load(SOURCE, {"matmul_naive": "void(const float*, const float*, float*, int64_t, int64_t, int64_t)"},
                  flags=FLAGS)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A, B = A.contiguous(), B.contiguous()
        C = torch.empty(A.shape[0], B.shape[1], dtype=A.dtype)
        lib.matmul_naive(A, B, C, A.shape[0], A.shape[1], B.shape[1])
        return C
