# expect: gate: calls the reference op 'relu'
# task: tiny_relu
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        return F.relu(x)
