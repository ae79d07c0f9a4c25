import torch
import torch.nn as nn


class Model(nn.Module):
    """Layer normalization over the last dimension, with a learned scale and shift."""

    def __init__(self, dim: int):
        super().__init__()
        self.ln = nn.LayerNorm(dim, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 512
dim = 1024


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [dim]


KILN = {
    "op_family": "norm",
    "level": 1,
    "workloads": [
        {"name": "square", "batch_size": 512, "dim": 1024},
        {"name": "wide", "batch_size": 64, "dim": 8192},
        {"name": "tall", "batch_size": 4096, "dim": 256},
    ],
    # sum, subtract, square, sum, then subtract, scale, weight, bias per element
    "flops": lambda batch_size, dim, **_: 8.0 * batch_size * dim,
    # x read, y written, weight and bias read once
    "bytes": lambda batch_size, dim, **_: 8.0 * batch_size * dim + 8.0 * dim,
    "start": "seeds/layer_norm.py",
}
