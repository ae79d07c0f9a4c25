import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that scales its first input, adds the second and applies Tanh.
    """
    def __init__(self, scale_factor):
        super(Model, self).__init__()
        self.scale_factor = scale_factor

    def forward(self, x, y):
        x = x * self.scale_factor
        x = x + y
        x = torch.tanh(x)
        return x

batch_size = 64
dim = 16384
scale_factor = 0.75

def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]

def get_init_inputs():
    return [scale_factor]
