import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    """
    The feed-forward half of a pre-norm transformer block: x + MLP(LayerNorm(x)),
    where the MLP is Linear -> GELU -> Linear.
    """
    def __init__(self, n_embd, hidden_size):
        """
        :param n_embd: Embedding dimension
        :param hidden_size: Hidden size of the MLP
        """
        super(Model, self).__init__()
        self.ln = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, hidden_size)
        self.c_proj = nn.Linear(hidden_size, n_embd)

    def forward(self, x):
        """
        :param x: Input tensor of shape (batch_size, seq_len, n_embd)
        :return: Output tensor of the same shape
        """
        h = self.ln(x)
        h = self.c_fc(h)
        h = F.gelu(h)
        h = self.c_proj(h)
        return x + h

batch_size = 2
seq_len = 128
n_embd = 256
hidden_size = 1024

def get_inputs():
    return [torch.randn(batch_size, seq_len, n_embd)]

def get_init_inputs():
    return [n_embd, hidden_size]
