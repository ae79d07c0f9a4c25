"""Declared shapes: the workloads a model is optimized for, and each region matched across them.

A user declares sizes by name (``--shapes seq=1,128 --shapes batch=1,4``); the input
function is called with each combination as keyword arguments, and the model is captured
at each. The same region at every shape becomes one task with one workload per shape, so
one search finds one kernel for all of them. Captures whose regions line up (the same
operations in the same order, only sizes differing) are matched place by place; where a
shape's graph has other operations (a decode step's attention, without a mask) only the
regions that differ get tasks of their own.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelkiln.errors import UserError
from kernelkiln.model.capture import Captured
from kernelkiln.model.regions import Partition, Region
from kernelkiln.model.taskfile import shape_free_key


@dataclass(frozen=True)
class Declared:
    """One declared shape: its label (``seq=128``; "" for the example alone), its example inputs and fresh draws."""

    label: str
    example: tuple[Any, ...]
    draw: Callable[[], tuple[Any, ...]]

    def inputs(self) -> list[str]:
        """The example inputs' dtypes and shapes (``int64[1, 128]``)."""
        return [
            f"{x.dtype}{list(x.shape)}".replace("torch.", "") if isinstance(x, torch.Tensor) else repr(x)
            for x in self.example
        ]


@dataclass(frozen=True)
class Place:
    """One place of a region in the model: the region at each declared shape it was matched at (by index)."""

    regions: dict[int, Region]

    def ordered(self) -> list[Region]:
        return [self.regions[w] for w in sorted(self.regions)]


@dataclass
class Shape:
    """One declared shape as captured, and each task's regions there (task key -> its places)."""

    declared: Declared
    captured: Captured | None  # None: captured through dynamo, the kernels run under torch.compile
    regions: dict[str, list[Region]]


def parse(specs: Sequence[str]) -> dict[str, list[int]]:
    """``["seq=1,128", "batch=1,4"]`` as ``{"seq": [1, 128], "batch": [1, 4]}``; one-line ``UserError`` if malformed."""
    sizes: dict[str, list[int]] = {}
    for spec in specs:
        name, eq, values = spec.partition("=")
        name = name.strip()
        try:
            numbers = [int(v) for v in values.split(",")] if eq else []
        except ValueError:
            numbers = []
        if not name.isidentifier() or not numbers or any(v <= 0 for v in numbers):
            raise UserError(f"--shapes {spec!r}: expected NAME=N[,N...] with positive integers (seq=1,128)")
        if name in sizes:
            raise UserError(f"--shapes: {name} is declared twice")
        sizes[name] = list(dict.fromkeys(numbers))
    return sizes


def declare(make_inputs: Callable[..., tuple[Any, ...]], sizes: dict[str, list[int]]) -> list[Declared]:
    """One ``Declared`` per combination of ``sizes``, its inputs ``make_inputs(**combination)``."""
    if not sizes:
        return [Declared("", tuple(make_inputs()), lambda: tuple(make_inputs()))]
    declared = []
    for values in itertools.product(*sizes.values()):
        combination = dict(zip(sizes, values, strict=True))

        def draw(combination: dict[str, int] = combination) -> tuple[Any, ...]:
            return tuple(make_inputs(**combination))

        label = ", ".join(f"{k}={v}" for k, v in combination.items())
        declared.append(Declared(label, draw(), draw))
    return declared


def places(parts: Sequence[Partition]) -> list[Place]:
    """Every region of every shape in one place: the same region at several shapes shares one.

    Shapes whose regions line up (equal ``shape_free_key`` sequences) share every place,
    position by position; another group's sequence is aligned to the first's (the longest
    matching runs, as ``difflib`` finds them), so a region that differs at one shape (a
    decode step's attention without a mask) gets a place of its own there and the rest are
    still shared.
    """
    keys = [tuple(shape_free_key(r) for r in part.regions) for part in parts]
    sequences = list(dict.fromkeys(keys))
    groups = [[w for w, k in enumerate(keys) if k == sequence] for sequence in sequences]
    found = [Place({w: parts[w].regions[i] for w in groups[0]}) for i in range(len(sequences[0]))]
    for sequence, shapes in zip(sequences[1:], groups[1:], strict=True):
        matched: set[int] = set()
        blocks = difflib.SequenceMatcher(None, sequences[0], sequence, autojunk=False).get_matching_blocks()
        for a, b, size in blocks:
            for k in range(size):
                found[a + k].regions.update({w: parts[w].regions[b + k] for w in shapes})
                matched.add(b + k)
        found += [Place({w: parts[w].regions[i] for w in shapes}) for i in range(len(sequence)) if i not in matched]
    return found
