"""Naive C RMS norm: two scalar passes per row (sum of squares, then scale by the weight).

Knobs a tuner may rewrite: compiler FLAGS, independent ACCUMULATORS for the sum of
squares (they let the compiler vectorize without -ffast-math) and UNROLL of the inner
loops.
"""

import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <math.h>
#include <stdint.h>

#define STR(x) #x
#define PRAGMA(x) _Pragma(STR(x))
#define UNROLLED(n) PRAGMA(GCC unroll n)

void rms_norm_rows(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        float q[ACCUMULATORS] = {0};
        int64_t c = 0;
        UNROLLED(UNROLL)
        for (; c + ACCUMULATORS <= n; c += ACCUMULATORS)
            for (int a = 0; a < ACCUMULATORS; ++a) q[a] += xr[c + a] * xr[c + a];
        for (; c < n; ++c) q[0] += xr[c] * xr[c];
        float ss = 0.0f;
        for (int a = 0; a < ACCUMULATORS; ++a) ss += q[a];
        float inv = 1.0f / sqrtf(ss / (float)n + eps);
        UNROLLED(UNROLL)
        for (c = 0; c < n; ++c) yr[c] = xr[c] * inv * w[c];
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
    SOURCE, {"rms_norm_rows": "void(const float*, const float*, float*, int64_t, int64_t, float)"},
    flags=[*FLAGS, f"-DACCUMULATORS={ACCUMULATORS}", f"-DUNROLL={UNROLL}"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.RMSNorm(dim, eps=1e-6)  # the reference's parameters, created the same way

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.rms_norm_rows(x, self.norm.weight.detach(), y, x.shape[0], x.shape[1], self.norm.eps)
        return y
