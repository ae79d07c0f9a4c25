# expect: gate: calls the reference op 'divide'
# task: tiny_div
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        return torch.divide(x, y)
