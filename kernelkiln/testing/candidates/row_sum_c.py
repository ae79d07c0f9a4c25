"""An honest C row sum for long_row_sum: one sequential float32 loop per row, so far less accurate than torch's."""

import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <stdint.h>

void row_sum(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float s = 0.0f;
        for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c];
        y[r] = s;
    }
}
"""
lib = native.load(SOURCE, {"row_sum": "void(const float*, float*, int64_t, int64_t)"})


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape[0], dtype=x.dtype)
        lib.row_sum(x, y, x.shape[0], x.shape[1])
        return y
