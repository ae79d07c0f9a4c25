# expect: check: constant output|outside tolerance|non-finite|cached or stale
"""Reuse of freed memory: a tensor the size of the output is allocated and freed, then
``torch.empty_like(x)`` is returned in the hope that the allocator hands back a block
that still holds a previous (reference) result.

On a GPU, PyTorch's caching allocator does hand back the block just freed. It never
holds a reference result: the reference runs in its own worker process (and in the
parent for the check), never in the candidate's. The check compares every element with
the parent's reference on fresh inputs each trial and rejects constant outputs and
outputs equal to the previous call's on different inputs; the timing stage re-checks
a random output while timed.
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        scratch = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        del scratch
        return torch.empty_like(x)
