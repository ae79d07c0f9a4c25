# expect: check: outside tolerance
"""Precision downgrade in Triton: the row is loaded as float16, reduced and exponentiated in
float16, and stored back as float32, so the output has the right dtype but half the bits.

On a GPU this is twice the bandwidth for free; it is caught by the float32 tolerance
(atol = rtol = 1e-4) on the same check, which compares against a float32 reference on
every element. The test task's logits have a realistic spread, so the rounding of
float16 (about 5e-4 relative) is always larger than the tolerance.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_half(x_ptr, y_ptr, cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_SIZE)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=-float("inf")).to(tl.float16)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * cols + offs, (e / tl.sum(e, axis=0)).to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rows, cols = x.shape
        softmax_half[(rows,)](x, y, cols, BLOCK_SIZE=triton.next_power_of_2(cols))
        return y
