"""Naive C matmul: the textbook i-j-k triple loop.

Knobs a tuner may rewrite: LOOP_ORDER (i-j-k strides through B by columns; i-k-j
streams rows of B and C, so its inner loop vectorizes), BLOCK (cache blocking: the
loops walk BLOCK x BLOCK tiles of A and B in either order; 0 means unblocked),
UNROLL of the inner loop, and FLAGS.
"""

import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <stdint.h>
#include <string.h>

#define STR(x) #x
#define PRAGMA(x) _Pragma(STR(x))
#define UNROLLED(n) PRAGMA(GCC unroll n)
#define MIN(a, b) ((a) < (b) ? (a) : (b))

void gemm_kernel(const float* restrict A, const float* restrict B, float* restrict C, int64_t M, int64_t K, int64_t N) {
    memset(C, 0, sizeof(float) * M * N);
    int64_t bm = BLOCK > 0 ? BLOCK : M, bk = BLOCK > 0 ? BLOCK : K, bn = BLOCK > 0 ? BLOCK : N;
    for (int64_t i0 = 0; i0 < M; i0 += bm)
        for (int64_t k0 = 0; k0 < K; k0 += bk)
            for (int64_t j0 = 0; j0 < N; j0 += bn) {
                int64_t i1 = MIN(i0 + bm, M), k1 = MIN(k0 + bk, K), j1 = MIN(j0 + bn, N);
                for (int64_t i = i0; i < i1; ++i) {
                    float* restrict c = C + i * N;
#if IKJ
                    for (int64_t k = k0; k < k1; ++k) {
                        const float a = A[i * K + k];
                        const float* restrict b = B + k * N;
                        UNROLLED(UNROLL)
                        for (int64_t j = j0; j < j1; ++j) c[j] += a * b[j];
                    }
#else
                    for (int64_t j = j0; j < j1; ++j) {
                        float acc = c[j];
                        UNROLLED(UNROLL)
                        for (int64_t k = k0; k < k1; ++k) acc += A[i * K + k] * B[k * N + j];
                        c[j] = acc;
                    }
#endif
                }
            }
}
"""

# Knobs: module-level constants a tuner may rewrite, with the values it may try.
FLAGS = ["-O2"]
LOOP_ORDER = "ijk"
BLOCK = 0
UNROLL = 1
KNOBS = {
    "FLAGS": [["-O2"], ["-O3", "-march=native"], ["-O3", "-march=native", "-ffast-math"]],
    "LOOP_ORDER": ["ijk", "ikj"],
    "BLOCK": [0, 32, 64, 128],
    "UNROLL": [1, 4, 8],
}

lib = native.load(
    SOURCE, {"gemm_kernel": "void(const float*, const float*, float*, int64_t, int64_t, int64_t)"},
    flags=[*FLAGS, f"-DIKJ={int(LOOP_ORDER == 'ikj')}", f"-DBLOCK={BLOCK}", f"-DUNROLL={UNROLL}"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        A, B = A.contiguous(), B.contiguous()
        C = torch.empty(A.shape[0], B.shape[1], dtype=A.dtype)
        lib.gemm_kernel(A, B, C, A.shape[0], A.shape[1], B.shape[1])
        return C
