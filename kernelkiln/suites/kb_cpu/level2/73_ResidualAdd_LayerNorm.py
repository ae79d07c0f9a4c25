import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that adds a residual branch to its input and applies Layer Normalization.
    """
    def __init__(self, hidden_size):
        super(Model, self).__init__()
        self.norm = nn.LayerNorm(hidden_size)

    def forward(self, x, residual):
        x = x + residual
        x = self.norm(x)
        return x

batch_size = 16
seq_len = 128
hidden_size = 384

def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size), torch.randn(batch_size, seq_len, hidden_size)]

def get_init_inputs():
    return [hidden_size]
