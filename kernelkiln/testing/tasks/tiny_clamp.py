import torch
import torch.nn as nn


class Model(nn.Module):
    """Clamp to [-0.5, 0.5], small enough for fast tests."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp(x, -0.5, 0.5)


batch_size = 16
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


KILN = {"op_family": "elementwise", "workloads": [{"batch_size": 16, "dim": 64}]}
