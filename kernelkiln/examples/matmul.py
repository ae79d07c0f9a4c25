import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B for A (M, K) and B (K, N), single precision."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


M = 256
K = 256
N = 256


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(K, N)
    return [A, B]


def get_init_inputs():
    return []


KILN = {
    "op_family": "matmul",
    "workloads": [
        {"name": "square", "M": 256, "K": 256, "N": 256},
        {"name": "skinny", "M": 64, "K": 512, "N": 256},
    ],
    "flops": lambda M, K, N, **_: 2.0 * M * K * N,
    "bytes": lambda M, K, N, **_: 4.0 * (M * K + K * N + M * N),
    "start": {"cpu": "seeds/matmul.py", "cuda": "seeds/matmul_triton.py"},
}
