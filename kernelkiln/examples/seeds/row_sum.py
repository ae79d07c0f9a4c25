"""Naive C row sum: one scalar accumulator per row."""

import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <stdint.h>

#ifndef ACCUMULATORS
#define ACCUMULATORS 1
#endif

void row_sum(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float acc[ACCUMULATORS] = {0};
        int64_t c = 0;
        for (; c + ACCUMULATORS <= cols; c += ACCUMULATORS)
            for (int k = 0; k < ACCUMULATORS; ++k) acc[k] += xr[c + k];
        float s = 0.0f;
        for (int k = 0; k < ACCUMULATORS; ++k) s += acc[k];
        for (; c < cols; ++c) s += xr[c];
        y[r] = s;
    }
}
"""

# Knobs: module-level constants a tuner may rewrite, with the values it may try.
ACCUMULATORS = 1
FLAGS = ["-O2"]
KNOBS = {"ACCUMULATORS": [1, 4, 8, 16], "FLAGS": [["-O2"], ["-O3", "-march=native"]]}

lib = native.load(SOURCE, {"row_sum": "void(const float*, float*, int64_t, int64_t)"},
                  flags=[*FLAGS, f"-DACCUMULATORS={ACCUMULATORS}"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty(x.shape[0], dtype=x.dtype)
        lib.row_sum(x, y, x.shape[0], x.shape[1])
        return y
