# expect: check: calls the reference op 'threshold' at run time
# task: tiny_relu
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.Threshold(0.0, 0.0)  # relu by another name, behind a module

    def forward(self, x):
        return self.act(x)
