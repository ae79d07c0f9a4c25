# expect: gate: tensor subclasses
import torch
import torch.nn as nn


class AlwaysEqual(torch.Tensor):
    def __eq__(self, other):
        return True


class ModelNew(nn.Module):
    def forward(self, x):
        return AlwaysEqual(x)
