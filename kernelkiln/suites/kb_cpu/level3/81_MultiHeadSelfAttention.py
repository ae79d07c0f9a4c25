import math
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Multi-head self-attention as in a transformer block: query, key and value projections,
    scaled dot-product attention with a softmax, and an output projection.
    """
    def __init__(self, embed_dim, num_heads):
        """
        :param embed_dim: Embedding dimension of the input
        :param num_heads: Number of attention heads (must divide embed_dim)
        """
        super(Model, self).__init__()
        assert embed_dim % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x):
        """
        :param x: Input tensor of shape (batch_size, seq_len, embed_dim)
        :return: Output tensor of shape (batch_size, seq_len, embed_dim)
        """
        B, T, C = x.size()
        q = self.q_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)
        k = self.k_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)

        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        att = torch.softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, hd)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.out_proj(y)

batch_size = 2
seq_len = 128
embed_dim = 256
num_heads = 8

def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]

def get_init_inputs():
    return [embed_dim, num_heads]
