"""Naive C row softmax: three scalar passes per row (max, exp and sum, scale).

Knobs a tuner may rewrite: compiler FLAGS, independent ACCUMULATORS for the max and
sum reductions (they break the loop-carried dependence that blocks vectorization
without -ffast-math), UNROLL of the inner loops, and VARIANT: three passes, or an
online softmax that finds the max and the sum together in one pass.
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

static void softmax_row(const float* x, float* y, int64_t n) {
    float m[ACCUMULATORS], s[ACCUMULATORS];
    for (int a = 0; a < ACCUMULATORS; ++a) { m[a] = x[0]; s[a] = 0.0f; }
    int64_t c = 0;
#if ONLINE
    UNROLLED(UNROLL)
    for (; c + ACCUMULATORS <= n; c += ACCUMULATORS)
        for (int a = 0; a < ACCUMULATORS; ++a) {
            float v = x[c + a], hi = v > m[a] ? v : m[a];
            s[a] = s[a] * expf(m[a] - hi) + expf(v - hi);
            m[a] = hi;
        }
    for (; c < n; ++c) {
        float v = x[c], hi = v > m[0] ? v : m[0];
        s[0] = s[0] * expf(m[0] - hi) + expf(v - hi);
        m[0] = hi;
    }
    float mx = m[0];
    for (int a = 1; a < ACCUMULATORS; ++a) mx = m[a] > mx ? m[a] : mx;
    float sum = 0.0f;
    for (int a = 0; a < ACCUMULATORS; ++a) sum += s[a] * expf(m[a] - mx);
    float inv = 1.0f / sum;
    UNROLLED(UNROLL)
    for (c = 0; c < n; ++c) y[c] = expf(x[c] - mx) * inv;
#else
    UNROLLED(UNROLL)
    for (; c + ACCUMULATORS <= n; c += ACCUMULATORS)
        for (int a = 0; a < ACCUMULATORS; ++a) m[a] = x[c + a] > m[a] ? x[c + a] : m[a];
    for (; c < n; ++c) m[0] = x[c] > m[0] ? x[c] : m[0];
    float mx = m[0];
    for (int a = 1; a < ACCUMULATORS; ++a) mx = m[a] > mx ? m[a] : mx;
    c = 0;
    UNROLLED(UNROLL)
    for (; c + ACCUMULATORS <= n; c += ACCUMULATORS)
        for (int a = 0; a < ACCUMULATORS; ++a) { y[c + a] = expf(x[c + a] - mx); s[a] += y[c + a]; }
    for (; c < n; ++c) { y[c] = expf(x[c] - mx); s[0] += y[c]; }
    float sum = 0.0f;
    for (int a = 0; a < ACCUMULATORS; ++a) sum += s[a];
    float inv = 1.0f / sum;
    UNROLLED(UNROLL)
    for (c = 0; c < n; ++c) y[c] *= inv;
#endif
}

void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) softmax_row(x + r * cols, y + r * cols, cols);
}
"""

# Knobs: module-level constants a tuner may rewrite, with the values it may try.
FLAGS = ["-O2"]
ACCUMULATORS = 1
UNROLL = 1
VARIANT = "three_pass"
KNOBS = {
    "FLAGS": [["-O2"], ["-O3", "-march=native"], ["-O3", "-march=native", "-ffast-math"]],
    "ACCUMULATORS": [1, 4, 8, 16],
    "UNROLL": [1, 2, 4],
    "VARIANT": ["three_pass", "online"],
}

lib = native.load(
    SOURCE, {"softmax_rows": "void(const float*, float*, int64_t, int64_t)"},
    flags=[*FLAGS, f"-DACCUMULATORS={ACCUMULATORS}", f"-DUNROLL={UNROLL}", f"-DONLINE={int(VARIANT == 'online')}"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(x, y, x.shape[0], x.shape[1])
        return y
