import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that takes the maximum over a dimension, subtracts it from the input and exponentiates.
    """
    def __init__(self, dim):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x):
        x_max = torch.max(x, dim=self.dim, keepdim=True)[0]
        x = x - x_max
        x = torch.exp(x)
        return x

batch_size = 16
features = 128
seq_len = 512
dim = 1

def get_inputs():
    return [torch.randn(batch_size, features, seq_len)]

def get_init_inputs():
    return [dim]
