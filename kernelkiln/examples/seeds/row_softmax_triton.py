"""Triton row softmax: one program per row, the whole row in one block.

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
def softmax_kernel(y_ptr, x_ptr, x_stride, y_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * x_stride + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(y_ptr + row * y_stride + offs, num / tl.sum(num, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        block = 1 << (cols - 1).bit_length()
        softmax_kernel[(rows,)](y, x, x.stride(0), y.stride(0), cols, BLOCK_SIZE=block,
                                num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        return y
