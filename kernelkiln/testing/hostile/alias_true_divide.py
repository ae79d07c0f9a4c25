# expect: gate: calls the reference op 'true_divide'
# task: tiny_div
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        return torch.true_divide(x, y)
