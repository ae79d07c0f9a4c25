"""Naive C GELU (exact, erf form): one scalar loop over every element.

Knobs a tuner may rewrite: compiler FLAGS, UNROLL of the loop, and VARIANT: libm's
``erff`` (a scalar call the compiler cannot vectorize), or ``rational``, the
Abramowitz-Stegun 7.1.26 approximation of erf (error below 1.5e-7) built from a
polynomial and ``expf``, which vectorizes.
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

static inline float erf_of(float z) {
#if RATIONAL
    float a = fabsf(z);
    float t = 1.0f / (1.0f + 0.3275911f * a);
    float p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    float e = 1.0f - p * expf(-a * a);
    return copysignf(e, z);
#else
    return erff(z);
#endif
}

void gelu_elements(const float* x, float* y, int64_t n) {
    UNROLLED(UNROLL)
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + erf_of(v * 0.70710678118654752f));
    }
}
"""

# Knobs: module-level constants a tuner may rewrite, with the values it may try.
FLAGS = ["-O2"]
UNROLL = 1
VARIANT = "erff"
KNOBS = {
    "FLAGS": [["-O2"], ["-O3", "-march=native"], ["-O3", "-march=native", "-ffast-math"]],
    "UNROLL": [1, 4, 8],
    "VARIANT": ["erff", "rational"],
}

lib = native.load(
    SOURCE, {"gelu_elements": "void(const float*, float*, int64_t)"},
    flags=[*FLAGS, f"-DUNROLL={UNROLL}", f"-DRATIONAL={int(VARIANT == 'rational')}"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.gelu_elements(x, y, x.numel())
        return y
