# expect: gate: calls the reference op 'expit'
# task: tiny_sigmoid
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.special.expit(x)
