import torch
import torch.nn as nn


class Model(nn.Module):
    """Sum of each row of a 2-D tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


batch_size = 512
dim = 2048


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []


KILN = {
    "op_family": "reduction",
    "workloads": [
        {"name": "square", "batch_size": 512, "dim": 2048},
        {"name": "tall", "batch_size": 8192, "dim": 64},
    ],
    "flops": lambda batch_size, dim, **_: 1.0 * batch_size * dim,
    "bytes": lambda batch_size, dim, **_: 4.0 * batch_size * (dim + 1),
    "start": "seeds/row_sum.py",
}
