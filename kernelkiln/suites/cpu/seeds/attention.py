"""Naive C attention: per (batch, head) and query row, scores, a row softmax, a weighted sum of V.

Knobs a tuner may rewrite: compiler FLAGS, independent ACCUMULATORS for the q.k dot
products (they let them vectorize without -ffast-math), and VARIANT: ``scores`` keeps
the row of scores and runs a three-pass softmax over it; ``online`` streams the keys
once, rescaling the running sum and output whenever the running max grows (the
flash-attention recurrence).
"""

import math

import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = r"""
#include <math.h>
#include <stdint.h>

static float dot(const float* restrict a, const float* restrict b, int64_t d) {
    float acc[ACCUMULATORS] = {0};
    int64_t k = 0;
    for (; k + ACCUMULATORS <= d; k += ACCUMULATORS)
        for (int t = 0; t < ACCUMULATORS; ++t) acc[t] += a[k + t] * b[k + t];
    for (; k < d; ++k) acc[0] += a[k] * b[k];
    float s = 0.0f;
    for (int t = 0; t < ACCUMULATORS; ++t) s += acc[t];
    return s;
}

/* q, k, v, o: (heads, seq, d) contiguous; work: at least seq + d floats */
void attention_heads(const float* restrict q, const float* restrict k, const float* restrict v, float* restrict o,
                     float* restrict work, int64_t heads, int64_t seq, int64_t d, float scale) {
    for (int64_t h = 0; h < heads; ++h) {
        const float *qh = q + h * seq * d, *kh = k + h * seq * d, *vh = v + h * seq * d;
        for (int64_t i = 0; i < seq; ++i) {
            const float* qi = qh + i * d;
            float* oi = o + (h * seq + i) * d;
            float* acc = work + seq;
            for (int64_t c = 0; c < d; ++c) acc[c] = 0.0f;
#if ONLINE
            float m = dot(qi, kh, d) * scale, l = 0.0f;
            for (int64_t j = 0; j < seq; ++j) {
                float s = dot(qi, kh + j * d, d) * scale;
                if (s > m) {
                    float r = expf(m - s);
                    l *= r;
                    for (int64_t c = 0; c < d; ++c) acc[c] *= r;
                    m = s;
                }
                float p = expf(s - m);
                l += p;
                const float* vj = vh + j * d;
                for (int64_t c = 0; c < d; ++c) acc[c] += p * vj[c];
            }
#else
            float* p = work;
            for (int64_t j = 0; j < seq; ++j) p[j] = dot(qi, kh + j * d, d) * scale;
            float m = p[0], l = 0.0f;
            for (int64_t j = 1; j < seq; ++j) m = p[j] > m ? p[j] : m;
            for (int64_t j = 0; j < seq; ++j) { p[j] = expf(p[j] - m); l += p[j]; }
            for (int64_t j = 0; j < seq; ++j) {
                const float* vj = vh + j * d;
                for (int64_t c = 0; c < d; ++c) acc[c] += p[j] * vj[c];
            }
#endif
            float inv = 1.0f / l;
            for (int64_t c = 0; c < d; ++c) oi[c] = acc[c] * inv;
        }
    }
}
"""

# Knobs: module-level constants a tuner may rewrite, with the values it may try.
FLAGS = ["-O2"]
ACCUMULATORS = 1
VARIANT = "scores"
KNOBS = {
    "FLAGS": [["-O2"], ["-O3", "-march=native"], ["-O3", "-march=native", "-ffast-math"]],
    "ACCUMULATORS": [1, 4, 8],
    "VARIANT": ["scores", "online"],
}

lib = native.load(
    SOURCE,
    {"attention_heads":
     "void(const float*, const float*, const float*, float*, float*, int64_t, int64_t, int64_t, float)"},
    flags=[*FLAGS, f"-DACCUMULATORS={ACCUMULATORS}", f"-DONLINE={int(VARIANT == 'online')}"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        batch, heads, seq, d = q.shape
        o = torch.empty_like(q)
        work = torch.empty(seq + d, dtype=q.dtype)
        lib.attention_heads(q, k, v, o, work, batch * heads, seq, d, 1.0 / math.sqrt(d))
        return o
