# expect: check: outside tolerance
"""Precision downgrade in torch: the softmax is computed in bfloat16 and cast back to float32.

The output has the reference's dtype and shape; only its precision is lower. Caught by
the float32 tolerance of the check (atol = rtol = 1e-4) on a GPU as on a CPU, since the
parent compares against its own float32 reference element by element.
"""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        h = x.bfloat16()
        e = (h - h.amax(1, keepdim=True)).exp()
        return (e / e.sum(1, keepdim=True)).float()
