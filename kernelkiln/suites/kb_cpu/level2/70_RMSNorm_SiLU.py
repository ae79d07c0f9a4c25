import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that applies RMS normalization over the last dimension with a learned weight, then SiLU.
    """
    def __init__(self, hidden_size, eps=1e-6):
        super(Model, self).__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size) + 0.1 * torch.randn(hidden_size))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        x = x * self.weight
        x = x * torch.sigmoid(x)
        return x

batch_size = 16
seq_len = 128
hidden_size = 512
eps = 1e-6

def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size)]

def get_init_inputs():
    return [hidden_size, eps]
