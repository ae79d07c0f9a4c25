import torch
import torch.nn as nn


class Model(nn.Module):
    """Elementwise quotient (divisors kept away from zero), small enough for fast tests."""

    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return x / y


batch_size = 16
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim), torch.rand(batch_size, dim) + 0.5]


def get_init_inputs():
    return []


KILN = {"op_family": "elementwise", "workloads": [{"batch_size": 16, "dim": 64}]}
