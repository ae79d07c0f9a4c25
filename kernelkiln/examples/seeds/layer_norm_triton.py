"""Triton layer norm: one program per row, the whole row in one block.

Knobs a tuner may rewrite: NUM_WARPS and NUM_STAGES of the launch. Without a GPU the
guard checks it under Triton's interpreter (TRITON_INTERPRET=1), untimed.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

NUM_WARPS = 4
NUM_STAGES = 1
KNOBS = {"NUM_WARPS": [1, 2, 4, 8, 16], "NUM_STAGES": [1, 2, 3]}


@triton.jit
def layer_norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols
    inv = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride + offs, d * inv * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.eps = 1e-5

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        block = 1 << (cols - 1).bit_length()
        layer_norm_kernel[(rows,)](x, self.weight, self.bias, y, x.stride(0), cols, self.eps, BLOCK_SIZE=block,
                                   num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        return y
