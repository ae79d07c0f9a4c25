import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A linear layer (x @ W^T + b) followed by exact GELU: a GEMM with a fused epilogue."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x))


batch_size = 128
in_features = 512
out_features = 512


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features]


KILN = {
    "op_family": "fused_matmul",
    "level": 2,
    "workloads": [
        {"name": "square", "batch_size": 128, "in_features": 512, "out_features": 512},
        {"name": "deep", "batch_size": 32, "in_features": 1024, "out_features": 1024},
        {"name": "tall", "batch_size": 512, "in_features": 256, "out_features": 256},
    ],
    # the GEMM, plus bias and GELU (~14) per output
    "flops": lambda batch_size, in_features, out_features, **_:
        2.0 * batch_size * in_features * out_features + 15.0 * batch_size * out_features,
    # x, W and b read, y written
    "bytes": lambda batch_size, in_features, out_features, **_:
        4.0 * (batch_size * in_features + out_features * in_features + out_features + batch_size * out_features),
}
