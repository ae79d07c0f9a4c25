import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B, as a plain KernelBench file: no KILN, so the family is inferred (matmul)."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


N = 2048  # KernelBench-sized: inference runs on the meta device, so this costs nothing


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
