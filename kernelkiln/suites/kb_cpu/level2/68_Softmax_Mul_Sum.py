import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Model that applies softmax over the feature dimension, multiplies by a second tensor
    and sums over the same dimension (a softmax-weighted average).
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x, values):
        """
        Args:
            x (torch.Tensor): Scores of shape (batch_size, dim).
            values (torch.Tensor): Values of shape (batch_size, dim).

        Returns:
            torch.Tensor: Output tensor of shape (batch_size,).
        """
        weights = torch.softmax(x, dim=1)
        x = weights * values
        x = torch.sum(x, dim=1)
        return x

batch_size = 128
dim = 4096

def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
