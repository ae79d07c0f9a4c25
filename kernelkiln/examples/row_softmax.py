import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension of a 2-D tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 256
dim = 1024


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []


KILN = {
    "op_family": "softmax",
    "workloads": [
        {"name": "square", "batch_size": 256, "dim": 1024},
        {"name": "wide", "batch_size": 32, "dim": 8192},
        {"name": "tall", "batch_size": 2048, "dim": 128},
    ],
    "flops": lambda batch_size, dim, **_: 5.0 * batch_size * dim,
    "bytes": lambda batch_size, dim, **_: 8.0 * batch_size * dim,
    "start": {"cpu": "seeds/row_softmax.py", "cuda": "seeds/row_softmax_triton.py"},
}
