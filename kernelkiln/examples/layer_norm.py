import torch
import torch.nn as nn


class Model(nn.Module):
    """Layer normalization over the last dimension, with a learned scale and shift."""

    def __init__(self, dim: int):
        super().__init__()
        self.ln = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


batch_size = 256
dim = 1024


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [dim]


KILN = {
    "op_family": "norm",
    "workloads": [
        {"name": "square", "batch_size": 256, "dim": 1024},
        {"name": "wide", "batch_size": 32, "dim": 8192},
        {"name": "tall", "batch_size": 2048, "dim": 128},
    ],
    "flops": lambda batch_size, dim, **_: 8.0 * batch_size * dim,
    "bytes": lambda batch_size, dim, **_: 8.0 * batch_size * dim + 8.0 * dim,
    "start": {"cpu": "seeds/layer_norm.py", "cuda": "seeds/layer_norm_triton.py"},
}
