# expect: check: constant output|outside tolerance|non-finite|cached or stale
"""A decoy Triton kernel: it is launched, but only on a tiny dummy; the output is never written.

A reviewer skimming the code sees a kernel launch; the tensor returned is
``torch.empty_like(x)``, whatever memory held before. Defended the same way on a GPU:
the parent compares every output element with its own reference on fresh random
inputs (5 trials per workload), rejects constant outputs and outputs identical to the
previous call's; memory handed out by the caching allocator never holds a reference
result, because the reference runs in another process.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch(p, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(p + offs, tl.load(p + offs, mask=mask, other=0.0) + 1.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        dummy = torch.zeros(4, device=x.device)
        touch[(1,)](dummy, 4, BLOCK=4)
        return torch.empty_like(x)
