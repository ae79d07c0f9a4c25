"""Naive C linear + bias + GELU: one dot product of a row of x with a row of W per output.

y[i][j] = gelu(x[i] . W[j] + b[j]) with W stored (out, in) as nn.Linear keeps it, so
both operands of every dot product are contiguous rows. Knobs a tuner may rewrite:
compiler FLAGS, independent ACCUMULATORS for the dot product (they let it vectorize
without -ffast-math), and BLOCK, the number of rows of W a band holds while every row
of x passes over it (cache reuse of W; 0: no banding).
"""

import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <math.h>
#include <stdint.h>

void linear_bias_gelu(const float* restrict x, const float* restrict w, const float* restrict b,
                      float* restrict y, int64_t rows, int64_t in, int64_t out) {
    int64_t band = BLOCK > 0 ? BLOCK : out;
    for (int64_t j0 = 0; j0 < out; j0 += band) {
        int64_t j1 = j0 + band < out ? j0 + band : out;
        for (int64_t i = 0; i < rows; ++i) {
            const float* xr = x + i * in;
            for (int64_t j = j0; j < j1; ++j) {
                const float* wr = w + j * in;
                float acc[ACCUMULATORS] = {0};
                int64_t k = 0;
                for (; k + ACCUMULATORS <= in; k += ACCUMULATORS)
                    for (int a = 0; a < ACCUMULATORS; ++a) acc[a] += xr[k + a] * wr[k + a];
                for (; k < in; ++k) acc[0] += xr[k] * wr[k];
                float v = b[j];
                for (int a = 0; a < ACCUMULATORS; ++a) v += acc[a];
                y[i * out + j] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
            }
        }
    }
}
"""

# Knobs: module-level constants a tuner may rewrite, with the values it may try.
FLAGS = ["-O2"]
ACCUMULATORS = 1
BLOCK = 0
KNOBS = {
    "FLAGS": [["-O2"], ["-O3", "-march=native"], ["-O3", "-march=native", "-ffast-math"]],
    "ACCUMULATORS": [1, 4, 8, 16],
    "BLOCK": [0, 16, 64, 256],
}

lib = native.load(
    SOURCE,
    {"linear_bias_gelu": "void(const float*, const float*, const float*, float*, int64_t, int64_t, int64_t)"},
    flags=[*FLAGS, f"-DACCUMULATORS={ACCUMULATORS}", f"-DBLOCK={BLOCK}"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # the reference's parameters, created the same way

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w, b = self.linear.weight.detach().contiguous(), self.linear.bias.detach()
        y = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype)
        lib.linear_bias_gelu(x, w, b, y, x.shape[0], x.shape[1], w.shape[0])
        return y
