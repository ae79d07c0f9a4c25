# expect: check: calls the reference op 'hardtanh' at run time
# task: tiny_clamp
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.bound = nn.Hardtanh(-0.5, 0.5)  # clamp(x, -0.5, 0.5) by another name, behind a module

    def forward(self, x):
        return self.bound(x)
