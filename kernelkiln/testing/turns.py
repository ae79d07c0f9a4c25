"""Turns for tests: a real tiny task, a lens, and whatever memory a test piles on."""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

from kernelkiln.memory.retrieval import Retrieved
from kernelkiln.policy.lens import Lens, load_lenses
from kernelkiln.policy.turn import Turn
from kernelkiln.store.records import Experience
from kernelkiln.task import Task, load_task
from kernelkiln.testing.tasks import TASKS

START_CODE = """import torch
import torch.nn as nn
from kernelkiln import native

SOURCE = "void softmax_rows(const float* x, float* y, long rows, long cols) {}"
lib = native.load(SOURCE, {"softmax_rows": "void(const float*, float*, int64_t, int64_t)"})


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.softmax_rows(x, y, x.shape[0], x.shape[1])
        return y
"""


@cache
def tiny_task(name: str = "tiny_softmax") -> Task:
    """A task from ``kernelkiln/testing/tasks`` (loaded once per process)."""
    return load_task(TASKS / f"{name}.py")


def lens(name: str = "general") -> Lens:
    """A bundled lens by name."""
    return next(item for item in load_lenses() if item.name == name)


def make_turn(**overrides: Any) -> Turn:
    """A first optimization turn of agent ``a0`` on ``tiny_softmax`` (cpu), with ``overrides`` applied."""
    base = Turn(
        task=tiny_task(),
        platform="cpu",
        agent="a0",
        lens=lens(),
        objective="optimization",
        turn=1,
        code=START_CODE,
        parent_id=None,
        best_speedup=None,
        feedback=None,
        verdict=None,
    )
    return dataclasses.replace(base, **overrides)


def retrieved(
    experience_id: str,
    text: str,
    *,
    kind: str = "experience",
    summary: str = "",
    q: float = 0.0,
    score: float = 1.0,
    **fields: Any,
) -> Retrieved:
    """A retrieved experience (or knowledge section, ``kind="knowledge"``) as the retriever returns it."""
    experience = Experience(id=experience_id, kind=kind, text=text, summary=summary, q=q, **fields)
    return Retrieved(experience=experience, relevance=score, value_score=score, graph_score=0.0, score=score)
