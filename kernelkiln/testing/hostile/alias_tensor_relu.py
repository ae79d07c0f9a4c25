# expect: gate: calls the reference op 'relu'
# task: tiny_relu
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.Tensor.relu(x)
