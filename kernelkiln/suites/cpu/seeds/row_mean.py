"""Naive C row mean: one scalar accumulator per row, divided by the row length.

Knobs a tuner may rewrite: compiler FLAGS, independent ACCUMULATORS (they break the
loop-carried dependence that blocks vectorization without -ffast-math) and UNROLL of
the inner loop.
"""

import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <stdint.h>

#define STR(x) #x
#define PRAGMA(x) _Pragma(STR(x))
#define UNROLLED(n) PRAGMA(GCC unroll n)

void row_mean(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float acc[ACCUMULATORS] = {0};
        int64_t c = 0;
        UNROLLED(UNROLL)
        for (; c + ACCUMULATORS <= cols; c += ACCUMULATORS)
            for (int a = 0; a < ACCUMULATORS; ++a) acc[a] += xr[c + a];
        for (; c < cols; ++c) acc[0] += xr[c];
        float s = 0.0f;
        for (int a = 0; a < ACCUMULATORS; ++a) s += acc[a];
        y[r] = s / (float)cols;
    }
}
"""

# Knobs: module-level constants a tuner may rewrite, with the values it may try.
FLAGS = ["-O2"]
ACCUMULATORS = 1
UNROLL = 1
KNOBS = {
    "FLAGS": [["-O2"], ["-O3", "-march=native"], ["-O3", "-march=native", "-ffast-math"]],
    "ACCUMULATORS": [1, 4, 8, 16],
    "UNROLL": [1, 2, 4],
}

lib = native.load(
    SOURCE, {"row_mean": "void(const float*, float*, int64_t, int64_t)"},
    flags=[*FLAGS, f"-DACCUMULATORS={ACCUMULATORS}", f"-DUNROLL={UNROLL}"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty(x.shape[0], dtype=x.dtype)
        lib.row_mean(x, y, x.shape[0], x.shape[1])
        return y
