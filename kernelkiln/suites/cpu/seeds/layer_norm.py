"""Naive C layer norm: three scalar passes per row (mean, variance of the deviations, normalize).

Knobs a tuner may rewrite: compiler FLAGS, independent ACCUMULATORS for the two
reductions (they let the compiler vectorize without -ffast-math) and UNROLL of the
inner loops.
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

void layer_norm_rows(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t n, float eps) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        float s[ACCUMULATORS] = {0}, q[ACCUMULATORS] = {0};
        int64_t c = 0;
        UNROLLED(UNROLL)
        for (; c + ACCUMULATORS <= n; c += ACCUMULATORS)
            for (int a = 0; a < ACCUMULATORS; ++a) s[a] += xr[c + a];
        for (; c < n; ++c) s[0] += xr[c];
        float mean = 0.0f;
        for (int a = 0; a < ACCUMULATORS; ++a) mean += s[a];
        mean /= (float)n;
        c = 0;
        UNROLLED(UNROLL)
        for (; c + ACCUMULATORS <= n; c += ACCUMULATORS)
            for (int a = 0; a < ACCUMULATORS; ++a) { float d = xr[c + a] - mean; q[a] += d * d; }
        for (; c < n; ++c) { float d = xr[c] - mean; q[0] += d * d; }
        float var = 0.0f;
        for (int a = 0; a < ACCUMULATORS; ++a) var += q[a];
        float inv = 1.0f / sqrtf(var / (float)n + eps);
        UNROLLED(UNROLL)
        for (c = 0; c < n; ++c) yr[c] = (xr[c] - mean) * inv * w[c] + b[c];
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
    SOURCE,
    {"layer_norm_rows": "void(const float*, const float*, const float*, float*, int64_t, int64_t, float)"},
    flags=[*FLAGS, f"-DACCUMULATORS={ACCUMULATORS}", f"-DUNROLL={UNROLL}"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.ln = nn.LayerNorm(dim, eps=1e-5)  # the reference's parameters, created the same way

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.layer_norm_rows(x, self.ln.weight.detach(), self.ln.bias.detach(), y, x.shape[0], x.shape[1],
                            self.ln.eps)
        return y
