import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """
    Model that applies Layer Normalization over the last dimension, then GELU, then scales the result.
    """
    def __init__(self, hidden_size, eps=1e-5, scaling_factor=1.0):
        super(Model, self).__init__()
        self.layer_norm = nn.LayerNorm(hidden_size, eps=eps)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        """
        Args:
            x (torch.Tensor): Input tensor of shape (batch_size, seq_len, hidden_size).

        Returns:
            torch.Tensor: Output tensor of the same shape.
        """
        x = self.layer_norm(x)
        x = F.gelu(x)
        x = x * self.scaling_factor
        return x

batch_size = 16
seq_len = 128
hidden_size = 512
eps = 1e-5
scaling_factor = 2.0

def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden_size)]

def get_init_inputs():
    return [hidden_size, eps, scaling_factor]
