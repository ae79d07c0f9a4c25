import torch
import torch.nn as nn


class Model(nn.Module):
    """A 2-D convolution, as a plain KernelBench file: no KILN, so the family is inferred (conv)."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return self.conv(x)


batch_size = 2
in_channels = 3
out_channels = 4
kernel_size = 3
height = width = 8


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
