import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """GELU (exact, erf form) applied elementwise."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


batch_size = 1024
dim = 1024


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []


KILN = {
    "op_family": "elementwise",
    "level": 1,
    "workloads": [
        {"name": "square", "batch_size": 1024, "dim": 1024},
        {"name": "wide", "batch_size": 32, "dim": 8192},
        {"name": "tall", "batch_size": 4096, "dim": 256},
    ],
    # erf (~10), scale, add, two multiplies per element
    "flops": lambda batch_size, dim, **_: 14.0 * batch_size * dim,
    "bytes": lambda batch_size, dim, **_: 8.0 * batch_size * dim,
    "start": "seeds/gelu.py",
}
