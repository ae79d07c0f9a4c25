"""Tiny whole models for ``kiln model``'s tests: small enough to capture, optimize and splice in seconds.

``TinyLM``: token ids → embedding → two identical pre-norm blocks (LayerNorm → Linear → GELU →
Linear, with a residual) → a head tied to the embedding. ``TinyMLP``: two identical blocks
(Linear → GELU → Linear, with a residual) on a float matrix, two distinct regions in all.
``tiny_gpt2``: Hugging Face's GPT-2 at a toy size (random weights, nothing downloaded).
``Branchy``: a block torch.export refuses (a branch on data) and dynamo captures in two graphs.
``Shifted``: a callable that is wrong by a constant, for the end-to-end check.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

HIDDEN = 32
SEQ = 8
VOCAB = 64


class PreNormBlock(nn.Module):
    def __init__(self, hidden: int = HIDDEN):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, 2 * hidden)
        self.down = nn.Linear(2 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


class TinyLM(nn.Module):
    """Embedding, two identical blocks, and a head whose weight is the embedding's (tied)."""

    def __init__(self, vocab: int = VOCAB, hidden: int = HIDDEN, blocks: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList([PreNormBlock(hidden) for _ in range(blocks)])
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


class MLPBlock(nn.Module):
    def __init__(self, hidden: int = HIDDEN):
        super().__init__()
        self.up = nn.Linear(hidden, 2 * hidden)
        self.down = nn.Linear(2 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(x)))


class TinyMLP(nn.Module):
    """Two identical residual MLP blocks on a (SEQ, HIDDEN) matrix: four regions, two distinct tasks."""

    def __init__(self, hidden: int = HIDDEN, blocks: int = 2):
        super().__init__()
        self.blocks = nn.Sequential(*[MLPBlock(hidden) for _ in range(blocks)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


class Branchy(nn.Module):
    """A residual MLP block with a branch on a tensor's value inside: torch.export cannot capture it (the
    branch depends on data), dynamo breaks its graph there and captures the two stretches around it."""

    def __init__(self, hidden: int = HIDDEN):
        super().__init__()
        self.up = nn.Linear(hidden, 2 * hidden)
        self.down = nn.Linear(2 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.up(x))
        if h.sum() > 0:
            h = h * 2
        return x + self.down(h)


def branchy(seed: int = 0) -> Branchy:
    torch.manual_seed(seed)
    return Branchy().eval()


def tiny_lm(seed: int = 0) -> TinyLM:
    torch.manual_seed(seed)
    return TinyLM().eval()


def tiny_mlp(seed: int = 0) -> TinyMLP:
    torch.manual_seed(seed)
    return TinyMLP().eval()


def tokens(vocab: int = VOCAB, seq: int = SEQ) -> tuple[torch.Tensor]:
    return (torch.randint(0, vocab, (1, seq)),)


def activations(seq: int = SEQ, hidden: int = HIDDEN) -> tuple[torch.Tensor]:
    return (torch.randn(seq, hidden),)


def tiny_gpt2(use_cache: bool = False, seed: int = 0) -> nn.Module:
    """GPT-2 with two layers of width 32 and a vocabulary of 100 (``transformers`` must be installed)."""
    import transformers

    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32, use_cache=use_cache)
    torch.manual_seed(seed)
    return transformers.GPT2LMHeadModel(cfg).eval()


def tiny_bert(seed: int = 0) -> nn.Module:
    """BERT with two layers of width 32: its embeddings add a position embedding torch makes after the first add."""
    import transformers

    cfg = transformers.BertConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=100
    )
    torch.manual_seed(seed)
    return transformers.BertModel(cfg, add_pooling_layer=False).eval()


def gpt2_tokens() -> tuple[torch.Tensor]:
    return (torch.randint(0, 100, (1, SEQ)),)


class Shifted:
    """``fn``'s outputs plus ``by``: a spliced model that runs but is wrong."""

    def __init__(self, fn: Any, by: float = 1.0):
        self.fn = fn
        self.by = by

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args) + self.by


def up_kernel(returns: str) -> str:
    """A candidate for ``TinyMLP``'s up-projection region (weights ``w0``, bias, and ``w1``) whose ``forward``
    returns ``returns`` (an expression of ``x0``, ``self.w0`` and ``self.w1``; ``F`` is torch.nn.functional)."""
    return f"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w0 = nn.Parameter(torch.empty(64))
        self.w1 = nn.Parameter(torch.empty(64, 32))

    def forward(self, x0):
        return {returns}
"""


def tiny_mlp_shape() -> tuple[nn.Module, tuple[torch.Tensor], str, Any]:
    """``TinyMLP`` captured at its activations: the model, the example, its up-projection task's key and the
    ``model.shapes.Shape`` that ``model.endtoend.assemble`` takes."""
    from kernelkiln.model.capture import capture
    from kernelkiln.model.regions import partition
    from kernelkiln.model.shapes import Declared, Shape
    from kernelkiln.model.taskfile import by_structure

    model, example = tiny_mlp(), activations()
    captured = capture(model, example)
    groups = by_structure(partition(captured).regions)
    up = next(k for k, regions in groups.items() if "gelu" in regions[0].ops)
    return model, example, up, Shape(Declared("", example, activations), captured, groups)
