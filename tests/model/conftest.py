"""Captured tiny models, shared by the model package's tests (a capture takes seconds; it is made once)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelkiln.model.capture import Captured, capture
from kernelkiln.model.regions import Partition, Region, partition
from kernelkiln.model.taskfile import by_structure, render
from kernelkiln.testing.models import gpt2_tokens, tiny_bert, tiny_gpt2, tiny_lm, tokens


@dataclass
class Subject:
    """A model, its example inputs, its capture and its regions grouped by structure, each group's task file."""

    model: torch.nn.Module
    example: tuple[Any, ...]
    captured: Captured
    part: Partition
    groups: dict[str, list[Region]]
    tasks: dict[str, Path]
    draw: Callable[[], tuple[Any, ...]]  # fresh inputs of the example's shapes


def _subject(model: torch.nn.Module, draw: Callable[[], tuple[Any, ...]], folder: Path) -> Subject:
    example = draw()
    captured = capture(model, example)
    part = partition(captured)
    groups = by_structure(part.regions)
    tasks = {}
    for k, (key, regions) in enumerate(groups.items()):
        path = folder / f"region_{k:02d}.py"
        path.write_text(render(regions[0], f"region {k}"))
        tasks[key] = path
    return Subject(model, example, captured, part, groups, tasks, draw)


@pytest.fixture(scope="session")
def lm(tmp_path_factory) -> Subject:
    """``TinyLM``: embedding, two identical pre-norm blocks, a head tied to the embedding."""
    return _subject(tiny_lm(), tokens, tmp_path_factory.mktemp("lm"))


@pytest.fixture(scope="session")
def bert(tmp_path_factory) -> Subject:
    """Hugging Face's BERT with two layers of width 32."""
    return _subject(tiny_bert(), gpt2_tokens, tmp_path_factory.mktemp("bert"))


@pytest.fixture(scope="session")
def gpt2(tmp_path_factory) -> Subject:
    """Hugging Face's GPT-2 with two layers of width 32 (use_cache=False)."""
    return _subject(tiny_gpt2(), gpt2_tokens, tmp_path_factory.mktemp("gpt2"))


def save_generated(subject: Subject, out: Path, origin: str = "generated") -> Path:
    """The lowering's kernel for each of ``subject``'s tasks, saved in ``out/model/`` as the pipeline saves winners."""
    from kernelkiln.lowering import generate
    from kernelkiln.model import artifact
    from kernelkiln.model.shapes import Declared, Shape
    from kernelkiln.model.splice import Kernel
    from kernelkiln.task import load_task

    kernels = {key: Kernel(key, generate(load_task(path, {})).source, origin) for key, path in subject.tasks.items()}
    shape = Shape(Declared("", subject.example, subject.draw), subject.captured, subject.groups)
    return artifact.save(out, type(subject.model).__name__, [shape], 1, kernels)


@pytest.fixture(scope="session")
def lm_saved(lm, tmp_path_factory) -> Path:
    """``TinyLM``'s generated kernels saved: the output folder (``load_model``'s and ``backend``'s argument)."""
    out = tmp_path_factory.mktemp("lm-saved")
    save_generated(lm, out)
    return out
