import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """Scaled dot-product attention, softmax(Q K^T / sqrt(d)) V, over (batch, heads, seq, dim); no mask."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        return torch.matmul(torch.softmax(scores, dim=-1), v)


batch = 2
heads = 4
seq = 128
head_dim = 64


def get_inputs():
    q = torch.randn(batch, heads, seq, head_dim)
    k = torch.randn(batch, heads, seq, head_dim)
    v = torch.randn(batch, heads, seq, head_dim)
    return [q, k, v]


def get_init_inputs():
    return []


KILN = {
    "op_family": "attention",
    "level": 3,
    "workloads": [
        {"name": "base", "batch": 2, "heads": 4, "seq": 128, "head_dim": 64},
        {"name": "long", "batch": 1, "heads": 4, "seq": 256, "head_dim": 64},
        {"name": "short", "batch": 4, "heads": 8, "seq": 64, "head_dim": 32},
    ],
    # two GEMMs (Q K^T and P V), plus scale and softmax (~5) per score
    "flops": lambda batch, heads, seq, head_dim, **_:
        batch * heads * (4.0 * seq * seq * head_dim + 6.0 * seq * seq),
    # q, k, v read, output written
    "bytes": lambda batch, heads, seq, head_dim, **_: 16.0 * batch * heads * seq * head_dim,
}
