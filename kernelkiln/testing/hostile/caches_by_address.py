# expect: check: cached or stale result
import torch.nn as nn

CACHE = {}


class ModelNew(nn.Module):
    def forward(self, x):
        key = x.data_ptr()
        if key not in CACHE:
            e = (x - x.amax(1, keepdim=True)).exp()
            CACHE[key] = e / e.sum(1, keepdim=True)
        return CACHE[key].clone()
