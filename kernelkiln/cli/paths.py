"""What a command's TASK argument names: a task file, a bundled task, or SUITE/NAME."""

from __future__ import annotations

from pathlib import Path

from kernelkiln.errors import UserError
from kernelkiln.task import bundled_suites, load_suite


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


def target_paths(target: str, only: str | None = None) -> list[Path]:
    """The task files TARGET names: a suite (bundled or a folder) or one task; ``only`` (A,B,...) picks a suite's
    tasks by name, in that order."""
    path = Path(target)
    if not (path.is_dir() or (not path.exists() and target in bundled_suites())):
        if only:
            raise UserError(f"--tasks picks tasks of a suite; {target} is one task")
        return [resolve_task_path(target)]
    paths = load_suite(target).task_paths()
    if only:
        by_name = {p.stem: p for p in paths}
        wanted = [t.strip() for t in only.split(",") if t.strip()]
        missing = [t for t in wanted if t not in by_name]
        if missing:
            raise UserError(f"suite {target} has no task {missing[0]!r} (it has: {', '.join(by_name)})")
        paths = [by_name[t] for t in wanted]
    if not paths:
        raise UserError(f"suite {target} holds no task files")
    return paths
