# expect: gate: access to '__\w+__' is not allowed
import torch.nn as nn

OS = ().__class__.__base__.__subclasses__()


class ModelNew(nn.Module):
    def forward(self, x):
        return x
