import torch
import torch.nn as nn


class Model(nn.Module):
    """Noise drawn in forward (as KernelBench's LSTM draws its initial state): a candidate that makes the same
    draws from torch's global generator gives the same result."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        noise = torch.randn(x.shape[0], 1)
        return x * 0.5 + noise


batch_size = 16
dim = 64


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []


KILN = {"op_family": "elementwise", "allowed_ops": ["mul", "add"]}
