# expect: gate: monkeypatching torch
import torch
import torch.nn as nn

torch.exp = torch.sin  # make the reference's world slower or wrong


class ModelNew(nn.Module):
    def forward(self, x):
        e = (x - x.amax(1, keepdim=True)).exp()
        return e / e.sum(1, keepdim=True)
