# expect: gate: calls the reference op 'multiply'
# task: tiny_mul
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        return torch.multiply(x, y)
