# expect: gate: try/except fallback
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        try:
            raise RuntimeError("pretend the custom kernel failed")
        except RuntimeError:
            return F.softmax(x, dim=1)
