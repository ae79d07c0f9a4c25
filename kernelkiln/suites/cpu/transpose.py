import torch
import torch.nn as nn


class Model(nn.Module):
    """Out-of-place transpose of a 2-D tensor: (M, N) -> contiguous (N, M)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.t().contiguous()


M = 1024
N = 1024


def get_inputs():
    x = torch.randn(M, N)
    return [x]


def get_init_inputs():
    return []


KILN = {
    "op_family": "transpose",
    "level": 1,
    "workloads": [
        {"name": "square", "M": 1024, "N": 1024},
        {"name": "wide", "M": 256, "N": 4096},
        {"name": "odd", "M": 1000, "N": 600},
    ],
    "flops": 0.0,
    "bytes": lambda M, N, **_: 8.0 * M * N,
    # The reference is all plumbing (a view and a copy), so name the spellings of a transposed view.
    "forbidden_ops": ["t", "transpose", "permute", "swapaxes", "swapdims", "movedim", "moveaxis", "mT", "T",
                      "adjoint", "mH", "H", "as_strided"],
    "start": "seeds/transpose.py",
}
