# expect: gate: use of 'getattr'
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return getattr(torch, "soft" + "max")(x, 1)
