# expect: gate: use of 'open'
import torch.nn as nn

SECRET = open("/etc/hostname").read()


class ModelNew(nn.Module):
    def forward(self, x):
        return x
