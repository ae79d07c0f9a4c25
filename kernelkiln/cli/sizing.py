"""``--set`` and ``--shrink``: the size overrides a command loads its tasks with."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from kernelkiln.task import parse_overrides

SET_HELP = "Override a module-level size variable: --set dim=4096, --set input_shape='(4096,)' (repeatable)."
SHRINK_HELP = (
    "Divide every size variable by about K so a GPU-sized task runs on a CPU: --shrink 8 turns "
    "batch_size=128 into 16 and keeps kernel sizes, strides, group and head counts; the reference is "
    "run once at the sizes chosen, which are printed; --set values win."
)


def shrink_option() -> Any:
    return typer.Option(None, "--shrink", metavar="K", help=SHRINK_HELP)


def task_overrides(paths: list[Path], sets: list[str], shrink: float | None) -> list[dict[str, Any]]:
    """Per task file, its overrides: ``--set`` values, plus ``--shrink``'s (announced on stderr)."""
    explicit = parse_overrides(sets)
    if shrink is None:
        return [dict(explicit) for _ in paths]
    from kernelkiln.task.shrink import shrink as shrunk  # imports torch

    out = []
    for path in paths:
        chosen = shrunk(path, shrink, explicit)
        print(f"kiln: {chosen.line(shrink, path.stem if len(paths) > 1 else None)}", file=sys.stderr)
        out.append(chosen.overrides)
    return out
