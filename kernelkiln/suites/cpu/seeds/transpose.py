"""Naive C out-of-place transpose: y[j][i] = x[i][j], element by element.

Knobs a tuner may rewrite: compiler FLAGS, LOOP_ORDER (``read_rows`` walks x by rows
and writes y with a stride of M; ``write_rows`` writes y by rows and reads x with a
stride of N), and BLOCK, the side of the square tiles the loops walk so that both
the rows read and the rows written stay in cache (0: no tiling).
"""

import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <stdint.h>

static void tile(const float* restrict x, float* restrict y, int64_t M, int64_t N,
                 int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
#if WRITE_ROWS
    for (int64_t j = j0; j < j1; ++j)
        for (int64_t i = i0; i < i1; ++i) y[j * M + i] = x[i * N + j];
#else
    for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) y[j * M + i] = x[i * N + j];
#endif
}

void transpose_2d(const float* restrict x, float* restrict y, int64_t M, int64_t N) {
    int64_t bi = BLOCK > 0 ? BLOCK : M, bj = BLOCK > 0 ? BLOCK : N;
    for (int64_t i0 = 0; i0 < M; i0 += bi)
        for (int64_t j0 = 0; j0 < N; j0 += bj)
            tile(x, y, M, N, i0, i0 + bi < M ? i0 + bi : M, j0, j0 + bj < N ? j0 + bj : N);
}
"""

# Knobs: module-level constants a tuner may rewrite, with the values it may try.
FLAGS = ["-O2"]
LOOP_ORDER = "read_rows"
BLOCK = 0
KNOBS = {
    "FLAGS": [["-O2"], ["-O3", "-march=native"], ["-O3", "-march=native", "-ffast-math"]],
    "LOOP_ORDER": ["read_rows", "write_rows"],
    "BLOCK": [0, 8, 16, 32, 64],
}

lib = native.load(
    SOURCE, {"transpose_2d": "void(const float*, float*, int64_t, int64_t)"},
    flags=[*FLAGS, f"-DWRITE_ROWS={int(LOOP_ORDER == 'write_rows')}", f"-DBLOCK={BLOCK}"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        M, N = x.shape
        y = torch.empty(N, M, dtype=x.dtype)
        lib.transpose_2d(x, y, M, N)
        return y
