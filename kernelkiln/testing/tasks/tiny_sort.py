import torch
import torch.nn as nn


class Model(nn.Module):
    """Rows sorted: an operation kernelkiln's lowering does not have (aten.sort), and no KILN start."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sort(x, dim=1).values


batch_size = 16
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


KILN = {"op_family": "sort", "workloads": [{"batch_size": 16, "dim": 64}]}
