"""Where a report's inputs live: an output DIR's run.json or ablation.json, a bench repeat's store and bench.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kernelkiln.errors import UserError
from kernelkiln.orchestrator.results import RunResult


def read_run_json(target: str) -> tuple[Path, RunResult] | None:
    """``(DIR, what its run.json holds)`` when ``target`` is an output DIR (or its run.json); None for a run id."""
    path = Path(target)
    if path.is_file() and path.name == "run.json":
        path = path.parent
    elif not path.is_dir():
        if "/" in target or target.startswith("."):
            raise UserError(f"{target}: no such directory")
        return None
    file = path / "run.json"
    if not file.is_file():
        raise UserError(
            f"{path}: no run.json or ablation.json (give an output DIR of `kiln optimize` or "
            "`kiln ablate`, or a run id)"
        )
    data = _object(file, "tasks", "`kiln optimize`")
    try:
        return path.resolve(), RunResult.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise UserError(f"{file}: not a run.json this kernelkiln reads: {where}: {error['msg']}") from None


def read_ablation_json(target: str) -> tuple[Path, dict[str, Any]] | None:
    """``(DIR, ablation.json's object)`` when ``target`` is an output DIR of `kiln ablate` (or its ablation.json)."""
    path = Path(target)
    if path.is_file() and path.name == "ablation.json":
        path = path.parent
    file = path / "ablation.json"
    if not file.is_file():
        return None
    return path.resolve(), _object(file, "studies", "`kiln ablate`")


def _object(file: Path, key: str, writer: str) -> dict[str, Any]:
    """``file``'s JSON object, which must map ``key`` to an object; one line naming the file when not."""
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"{file}: not a readable {file.name} ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get(key), dict):
        raise UserError(f"{file}: not a {file.name} of {writer} (no {key})")
    return data


def sibling_store_url(folder: Path) -> str | None:
    """``sqlite:///DIR.db`` when that file exists: `kiln bench` keeps repeat K's store next to ``repeat-K/``."""
    db = folder.parent / f"{folder.name}.db"
    return f"sqlite:///{db}" if db.is_file() else None


def bench_sol(folder: Path, run_id: str) -> dict[str, tuple[float, str]]:
    """Per task, the SOL fraction `kiln bench` recorded for this run in ``DIR/../bench.json`` and where it
    stands in words (``memory-bound, 12.3 GB/s``; empty when not recorded). Empty if none."""
    try:
        bench = json.loads((folder.parent / "bench.json").read_text())
    except (OSError, ValueError):
        return {}
    for repeat in bench.get("repeats", []) if isinstance(bench, dict) else []:
        if isinstance(repeat, dict) and repeat.get("run_id") == run_id and isinstance(repeat.get("sol_fraction"), dict):
            tasks = repeat["tasks"] if isinstance(repeat.get("tasks"), dict) else {}
            return {
                k: (float(v), _reached(tasks.get(k)))
                for k, v in repeat["sol_fraction"].items()
                if isinstance(v, int | float) and not isinstance(v, bool)
            }
    return {}


def _reached(task: Any) -> str:
    """``memory-bound, 12.3 GB/s`` from a bench.json task entry's bound, achieved rate and its unit."""
    if not isinstance(task, dict):
        return ""
    bound, rate, unit = task.get("bound"), task.get("achieved"), task.get("achieved_unit")
    if not isinstance(bound, str) or not isinstance(rate, int | float) or not isinstance(unit, str):
        return ""
    return f"{bound}-bound, {rate:.3g} {unit}"
