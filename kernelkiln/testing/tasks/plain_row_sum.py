import torch
import torch.nn as nn


class Model(nn.Module):
    """Row sums, as a plain KernelBench file: no KILN, so the family is inferred (reduction)."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=1)


batch_size = 4
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
