# expect: check: outside tolerance
# load_inline's twin of half_precision: the extension computes the softmax with every value
# rounded to bfloat16 (its low 16 bits cut) and returns float32, the reference's dtype.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <cmath>
#include <cstring>

static float bf16(float v) {
    unsigned int bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits &= 0xffff0000u;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

torch::Tensor softmax_bf16(torch::Tensor x) {
    auto in = x.contiguous();
    auto out = torch::empty_like(in);
    const float* a = in.data_ptr<float>();
    float* y = out.data_ptr<float>();
    const int64_t rows = in.size(0), cols = in.size(1);
    for (int64_t r = 0; r < rows; ++r) {
        float m = a[r * cols], s = 0.0f;
        for (int64_t c = 1; c < cols; ++c) m = std::fmax(m, a[r * cols + c]);
        for (int64_t c = 0; c < cols; ++c) s = bf16(s + bf16(std::exp(bf16(a[r * cols + c] - m))));
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = bf16(bf16(std::exp(bf16(a[r * cols + c] - m))) / s);
    }
    return out;
}
"""
low = load_inline(name="low", cpp_sources=SOURCE, functions=["softmax_bf16"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return low.softmax_bf16(x)
