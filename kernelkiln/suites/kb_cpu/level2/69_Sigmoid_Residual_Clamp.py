import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that adds a scaled sigmoid of the input back to the input and clamps the result.
    """
    def __init__(self, scaling_factor, clamp_min, clamp_max):
        super(Model, self).__init__()
        self.scaling_factor = scaling_factor
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        original_x = x
        x = torch.sigmoid(x)
        x = x * self.scaling_factor
        x = x + original_x
        x = torch.clamp(x, min=self.clamp_min, max=self.clamp_max)
        return x

batch_size = 16
channels = 64
height, width = 32, 32
scaling_factor = 2.0
clamp_min = -1.0
clamp_max = 1.5

def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]

def get_init_inputs():
    return [scaling_factor, clamp_min, clamp_max]
