# expect: check: aliases an input
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        x.copy_(e / e.sum(1, keepdim=True))
        return x
