"""What a command's TASK argument names: a task file, a bundled task, or SUITE/NAME."""

from __future__ import annotations

from pathlib import Path

from kernelkiln.errors import UserError
from kernelkiln.task import bundled_suites


def resolve_task_path(name: str) -> Path:
    """A task file path, a bundled task's name, or SUITE/NAME (e.g. cpu/matmul) when names clash."""
    path = Path(name)
    if path.exists():
        return path
    suite_name, _, task_name = name.rpartition("/")
    if suite_name in bundled_suites():
        for candidate in bundled_suites()[suite_name].task_paths():
            if candidate.stem == task_name:
                return candidate
    for suite in bundled_suites().values():
        for candidate in suite.task_paths():
            if candidate.stem == name:
                return candidate
    raise UserError(f"no such task file or bundled task: {name} (see `kiln tasks`)")
