# expect: time: wrong result while timed
import torch
import torch.nn as nn

CALLS = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        CALLS[0] += 1
        if CALLS[0] > 40:  # past the correctness trials: skip the work
            return torch.zeros_like(x)
        e = (x - x.amax(1, keepdim=True)).exp()
        return e / e.sum(1, keepdim=True)
