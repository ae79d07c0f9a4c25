import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU on non-negative inputs, as KernelBench's ReLU task draws them."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = 16
dim = 64


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []


KILN = {"op_family": "elementwise", "workloads": [{"batch_size": 16, "dim": 64}]}
