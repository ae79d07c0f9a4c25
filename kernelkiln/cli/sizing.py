"""The size overrides a command loads its tasks with, from its ``--set`` and ``--shrink`` options."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kernelkiln.task import parse_overrides


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
