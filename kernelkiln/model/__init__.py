"""Whole models: capture, cut into tasks, optimize with memory, splice the kernels back, verify end to end.

``optimize_model`` is the entry point (``kiln model`` on the command line) and ``load_model``
runs the kernels it saved in ``OUT/model/`` again; see
``pipeline`` for the stages and ``docs/ARCHITECTURE.md`` for where each lives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kernelkiln.memory.memory import Memory
from kernelkiln.model.artifact import load_model
from kernelkiln.model.pipeline import ModelResult
from kernelkiln.model.pipeline import optimize_model as _optimize
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.store import open_store

__all__ = ["ModelResult", "load_model", "optimize_model"]


def optimize_model(
    model: torch.nn.Module,
    example_inputs: tuple[Any, ...],
    out: str | Path = "kiln-models/model",
    budget: int | None = None,
    store: str | None = None,
    threads: int | None = None,
    config: OptimizeConfig | None = None,
) -> ModelResult:
    """Optimize ``model`` at ``example_inputs``: ``.model`` runs the verified kernels, ``.report`` says where
    the time went. ``budget``: evaluations for the whole model; ``store``: memory's URL (default: the user's)."""
    config = config or OptimizeConfig()
    if threads is not None:
        config = config.model_copy(update={"guard": config.guard.model_copy(update={"threads": threads})})
    memory = Memory(open_store(store, config.store))
    try:
        return _optimize(model, tuple(example_inputs), Path(out), memory, config, budget=budget)
    finally:
        memory.store.close()
