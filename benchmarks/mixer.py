"""A plain-torch MLP-Mixer (Tolstikhin et al. 2021), small enough for a CPU: 32x32 images, 4x4 patches."""

import torch
import torch.nn as nn


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, dim: int, token_hidden: int, channel_hidden: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.token_mlp = nn.Sequential(nn.Linear(tokens, token_hidden), nn.GELU(), nn.Linear(token_hidden, tokens))
        self.norm2 = nn.LayerNorm(dim)
        self.channel_mlp = nn.Sequential(nn.Linear(dim, channel_hidden), nn.GELU(), nn.Linear(channel_hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class Mixer(nn.Module):
    def __init__(self, image=32, patch=4, dim=128, depth=2, token_hidden=64, channel_hidden=256, classes=10):
        super().__init__()
        self.patch = patch
        tokens = (image // patch) ** 2
        self.embed = nn.Linear(3 * patch * patch, dim)
        self.blocks = nn.Sequential(*[MixerBlock(tokens, dim, token_hidden, channel_hidden) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        b, c, h, w = images.shape
        p = self.patch
        x = images.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5).reshape(b, (h // p) * (w // p), -1)
        x = self.blocks(self.embed(x))
        return self.head(self.norm(x).mean(dim=1))


def mixer() -> nn.Module:
    torch.manual_seed(0)
    return Mixer().eval()


def images():
    return (torch.randn(8, 3, 32, 32),)
