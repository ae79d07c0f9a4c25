"""Whole models: capture, cut into tasks, optimize with memory, splice the kernels back, verify end to end.

``optimize_model`` is the entry point (``kiln model`` on the command line); ``load_model``
runs the kernels it saved in ``OUT/model/`` again, and ``backend`` runs them under
``torch.compile``; see
``pipeline`` for the stages and ``docs/architecture.md`` for where each lives.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kernelkiln.errors import UserError
from kernelkiln.memory.memory import Memory
from kernelkiln.model.backend import backend
from kernelkiln.model.load import load_model
from kernelkiln.model.pipeline import ModelResult, model_config
from kernelkiln.model.pipeline import optimize_model as _optimize
from kernelkiln.model.shapes import Declared, declare
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.store import open_store

__all__ = ["ModelResult", "backend", "load_model", "optimize_model"]


def optimize_model(
    model: torch.nn.Module,
    example_inputs: tuple[Any, ...] | None = None,
    out: str | Path = "kiln-models/model",
    model_budget: int | None = None,
    store: str | None = None,
    threads: int | None = None,
    config: OptimizeConfig | None = None,
    make_inputs: Callable[..., tuple[Any, ...]] | None = None,
    shapes: dict[str, list[int]] | None = None,
) -> ModelResult:
    """Optimize ``model``: ``.model`` runs the verified kernels, ``.report`` says where the time went.

    Inputs: ``example_inputs``, or ``make_inputs()`` (called again under fresh seeds for the
    end-to-end check); with ``shapes`` (``{"seq": [1, 128]}``), ``make_inputs(seq=1)`` and so
    on for every combination, each a declared shape the kernels serve. ``model_budget``:
    evaluations for the whole model, split between its tasks by time share (default: ``config.budget``
    per task, 15 without a config); ``store``: memory's URL (default: the user's). Where
    ``torch.export`` fails, dynamo captures the model, which resets dynamo
    (``torch._dynamo.reset()``): functions compiled earlier in the process compile again.
    """
    if make_inputs is None:
        if example_inputs is None or shapes:
            raise UserError("optimize_model needs example_inputs, or make_inputs (which shapes requires)")
        example = tuple(example_inputs)
        declared = [Declared("", example, lambda: example)]
    elif example_inputs is not None and not shapes:
        example, draw = tuple(example_inputs), make_inputs
        declared = [Declared("", example, lambda: tuple(draw()))]
    else:
        declared = declare(make_inputs, shapes or {})
    config = config or model_config()
    if threads is not None:
        config = config.model_copy(update={"guard": config.guard.model_copy(update={"threads": threads})})
    memory = Memory(open_store(store, config.store))
    try:
        return _optimize(model, declared, Path(out), memory, config, model_budget=model_budget)
    finally:
        memory.store.close()
