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
    """The task files TARGET names: a suite (bundled or a folder), several joined by commas, or one task;
    ``only`` (A,B,...) picks their tasks by name, in that order."""
    parts = [t.strip() for t in target.split(",") if t.strip()]
    suites = [p for p in parts if Path(p).is_dir() or (not Path(p).exists() and p in bundled_suites())]
    if len(parts) == 1 and not suites:
        if only:
            raise UserError(f"--tasks picks tasks of a suite; {target} is one task")
        return [resolve_task_path(target)]
    if len(suites) != len(parts):
        other = next(p for p in parts if p not in suites)
        raise UserError(f"{other} is not a suite: only suites may be joined with commas (see `kiln tasks`)")
    paths = [p for suite in suites for p in load_suite(suite).task_paths()]
    if only:
        by_name: dict[str, list[Path]] = {}
        for path in paths:
            by_name.setdefault(path.stem, []).append(path)
        wanted = [t.strip() for t in only.split(",") if t.strip()]
        missing = [t for t in wanted if t not in by_name]
        if missing:
            raise UserError(f"{target} has no task {missing[0]!r} (it has: {', '.join(by_name)})")
        twice = [t for t in wanted if len(by_name[t]) > 1]
        if twice:
            raise UserError(f"{twice[0]!r} is a task of more than one of {target}: pick it with one suite")
        paths = [by_name[t][0] for t in wanted]
    if not paths:
        raise UserError(f"{target} holds no task files")
    return paths
