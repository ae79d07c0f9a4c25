"""A tunable C row softmax for tiny_softmax: REPEAT > 1 is slower on purpose, so a tuner has something to find."""

import torch
import torch.nn as nn
from kernelkiln import native

REPEAT = 4
FLAGS = ["-O2"]
KNOBS = {"REPEAT": [4, 2, 1], "FLAGS": [["-O2"], ["-O1"]]}

SOURCE = r"""
#include <math.h>
#include <stdint.h>

void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols, int64_t repeat) {
    for (int64_t t = 0; t < repeat; ++t)
        for (int64_t r = 0; r < rows; ++r) {
            const float* xr = x + r * cols;
            float* yr = y + r * cols;
            float m = -INFINITY, s = 0.0f;
            for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
            for (int64_t c = 0; c < cols; ++c) { yr[c] = expf(xr[c] - m); s += yr[c]; }
            for (int64_t c = 0; c < cols; ++c) yr[c] /= s;
        }
}
"""
lib = native.load(SOURCE, {"softmax_rows": "void(const float*, float*, int64_t, int64_t, int64_t)"}, flags=FLAGS)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(x, y, x.shape[0], x.shape[1], REPEAT)
        return y
