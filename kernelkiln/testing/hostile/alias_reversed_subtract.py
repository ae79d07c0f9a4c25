# expect: gate: calls the reference op 'rsub'
# task: tiny_sub
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        return torch.rsub(y, x)
