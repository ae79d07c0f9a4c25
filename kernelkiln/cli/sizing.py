"""The size overrides a command loads its tasks with, from its ``--set`` and ``--shrink`` options."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kernelkiln.task import parse_overrides


def task_overrides(paths: list[Path], sets: list[str], shrink: str | None) -> list[dict[str, Any]]:
    """Per task file, its overrides: ``--set`` values, plus ``--shrink``'s (a factor or a time; announced on
    stderr)."""
    explicit = parse_overrides(sets)
    if shrink is None:
        return [dict(explicit) for _ in paths]
    from kernelkiln.task.shrink import fit, parse_shrink  # imports torch
    from kernelkiln.task.shrink import shrink as shrunk

    value = parse_shrink(shrink)
    out = []
    for path in paths:
        chosen = fit(path, value, explicit) if isinstance(value, str) else shrunk(path, value, explicit)
        print(f"kiln: {chosen.line(value, path.stem if len(paths) > 1 else None)}", file=sys.stderr)
        out.append(chosen.overrides)
    return out
