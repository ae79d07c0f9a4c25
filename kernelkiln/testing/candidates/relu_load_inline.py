"""A correct CPU ReLU written as KernelBench's candidates are: a C++ torch extension built by ``load_inline``."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_source = """
#include <torch/extension.h>

torch::Tensor relu_cpu(torch::Tensor x) {
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const float* in = input.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t size = input.numel();
    for (int64_t i = 0; i < size; ++i) {
        o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    }
    return out;
}
"""

relu_cpp_source = "torch::Tensor relu_cpu(torch::Tensor x);"

relu = load_inline(
    name="relu",
    cpp_sources=[relu_cpp_source, relu_source],
    functions=["relu_cpu"],
    verbose=True,
    extra_cflags=["-O3"],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.relu = relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu.relu_cpu(x)
