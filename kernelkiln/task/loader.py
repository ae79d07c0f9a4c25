"""Load a KernelBench-format task file, unmodified, plus optional ``KILN`` metadata."""

from __future__ import annotations

import ast
import math
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kernelkiln.errors import UserError
from kernelkiln.task.model import Task, Tolerance, Workload
from kernelkiln.task.reference_calls import inferred_family
from kernelkiln.task.roofline import with_derived_figures
from kernelkiln.task.sizes import execute, key, size_vars

_REQUIRED = ("Model", "get_inputs", "get_init_inputs")
_KILN_KEYS = {
    "op_family",
    "workloads",
    "tolerance",
    "flops",
    "bytes",
    "forbidden_ops",
    "allowed_ops",
    "start",
    "seed",  # start's earlier name
    "level",
    "robustness",
}


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """Parse ``NAME=VALUE`` strings; values are Python literals, else strings."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise UserError(f"--set expects NAME=VALUE, got {item!r}")
        try:
            out[name] = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError):
            out[name] = raw.strip()
    return out


def _metric(value: Any, sizes: dict[str, Any], what: str, where: str) -> float | None:
    if value is None:
        return None
    if callable(value):
        try:
            return float(value(**sizes))
        except Exception as exc:
            raise UserError(f"{where}: KILN[{what!r}] failed for {sizes}: {type(exc).__name__}: {exc}") from None
    if isinstance(value, (int, float)):
        return float(value)
    raise UserError(f"{where}: KILN[{what!r}] must be a number or a function of the size variables")


def _workloads(meta: dict[str, Any], task: Task, tree: ast.Module, where: str) -> list[Workload]:
    """One per KILN workload (default: one at the file's own sizes), each run in its own module.

    A workload's sizes are read back from its module, so derived size variables show the
    values computed from the ones set.
    """
    specs = meta.get("workloads") or [{}]
    if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
        raise UserError(f"{where}: KILN['workloads'] must be a list of dicts of size variables")
    workloads = []
    for i, spec in enumerate(specs):
        spec = dict(spec)
        name = str(spec.pop("name", f"w{i}"))
        unknown = set(spec) - set(task.size_vars)
        if unknown:
            raise UserError(f"{where}: workload {name!r} sets unknown size variable(s): {', '.join(sorted(unknown))}")
        sets = {**spec, **task.overrides}
        label = ", ".join(f"{k}={v}" for k, v in sets.items())
        module = (
            task.module
            if sets == task.overrides
            else execute(task.path, tree, task.module.__name__, sets, f"{where}: workload {name} ({label})")
        )
        sizes = {k: module.__dict__.get(k) for k in task.size_vars}
        task.modules.setdefault(key(sizes), module)
        workloads.append(
            Workload(
                name=name,
                sizes=sizes,
                flops=_metric(meta.get("flops"), sizes, "flops", where),
                bytes=_metric(meta.get("bytes"), sizes, "bytes", where),
            )
        )
    return workloads


def _tolerances(raw: Any, where: str) -> dict[str, Tolerance]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UserError(f"{where}: KILN['tolerance'] must be a dict")
    if "atol" in raw or "rtol" in raw:  # one tolerance for every dtype
        raw = {dt: raw for dt in ("float64", "float32", "float16", "bfloat16")}
    out = {}
    for dtype, tol in raw.items():
        try:
            out[str(dtype)] = Tolerance(float(tol["atol"]), float(tol["rtol"]), explicit=True)
        except (KeyError, TypeError, ValueError):
            raise UserError(f"{where}: KILN['tolerance'][{dtype!r}] needs numeric 'atol' and 'rtol'") from None
        if not (math.isfinite(out[str(dtype)].atol) and math.isfinite(out[str(dtype)].rtol)):
            raise UserError(f"{where}: tolerances must be finite")
    return out


def _ops(raw: Any, key: str, where: str) -> tuple[str, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, (list, tuple)) or not all(isinstance(x, str) for x in raw):
        raise UserError(f"{where}: KILN[{key!r}] must be a list of op names")
    return tuple(raw)


def exec_module(
    path: Path, source: str, name: str, before_exec: Callable[[dict[str, Any]], None] | None = None
) -> types.ModuleType:
    """Execute ``source`` as a fresh module; errors become one-line UserErrors."""
    try:
        code = compile(source, str(path), "exec")
    except SyntaxError as exc:
        raise UserError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    module = types.ModuleType(name)
    module.__file__ = str(path)
    if before_exec:
        before_exec(module.__dict__)
    try:
        exec(code, module.__dict__)
    except ModuleNotFoundError as exc:
        raise UserError(_missing(path, exc.name or str(exc))) from None
    except Exception as exc:
        raise UserError(f"{path}: failed to import: {type(exc).__name__}: {exc}") from None
    return module


# Third-party packages KernelBench's files import (``kernelkiln[kernelbench]`` installs them; pip names them so).
KERNELBENCH_PACKAGES = frozenset({"einops", "numpy"})


def _missing(path: Path, module: str) -> str:
    """The one line for a task that imports a package this environment lacks: what to install."""
    top = module.split(".")[0]
    extra = " (or every package KernelBench's files import: pip install 'kernelkiln[kernelbench]')"
    return f"{path}: imports {top}, which is not installed: pip install {top}" + (
        extra if top in KERNELBENCH_PACKAGES else ""
    )


def read_task_source(path: Path) -> str:
    """The task file's text; a missing or unreadable file is one line."""
    if not path.is_file():
        raise UserError(f"task file not found: {path}")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read task file {path}: {exc}") from None


def load_task(
    path: str | Path, overrides: dict[str, Any] | None = None, analyze: bool = True, starts: bool = True
) -> Task:
    """Load a task file; ``overrides`` (from ``--set``) replace module-level size variables.

    Unless ``analyze`` is False (a guard worker, which needs neither), a forward of the reference
    on the meta device fills what KILN leaves out: the op family from its calls
    (kernelkiln.task.reference_calls) and each workload's FLOPs and bytes (kernelkiln.task.roofline).
    ``starts=False`` skips KILN["start"] (the guard, which judges candidates, needs no starting candidate; an
    evaluation actor gets the task file alone).
    """
    path = Path(path)
    overrides = dict(overrides or {})
    source = read_task_source(path)
    name = path.stem
    pristine = exec_module(path, source, f"kiln_task_{name}")
    missing = [n for n in _REQUIRED if not hasattr(pristine, n)]
    if missing:
        raise UserError(f"{path}: not a KernelBench task: missing {', '.join(missing)}")
    tree = ast.parse(source)
    defaults = size_vars(tree, pristine.__dict__)
    unknown = set(overrides) - set(defaults)
    if unknown:
        known = ", ".join(sorted(defaults)) or "none"
        raise UserError(f"{path}: --set {sorted(unknown)[0]}: no such module-level size variable (known: {known})")
    # A stored run's overrides come back from JSON with lists for tuples: give them the file's own kind.
    overrides = {
        k: type(defaults[k])(v) if isinstance(v, (list, tuple)) and isinstance(defaults[k], (list, tuple)) else v
        for k, v in overrides.items()
    }
    meta = getattr(pristine, "KILN", {}) or {}
    if not isinstance(meta, dict):
        raise UserError(f"{path}: KILN must be a dict")
    extra = set(meta) - _KILN_KEYS
    if extra:
        raise UserError(
            f"{path}: unknown KILN key(s): {', '.join(sorted(extra))} (known: {', '.join(sorted(_KILN_KEYS))})"
        )
    level = meta.get("level", _folder_level(path))
    if not isinstance(level, int) or isinstance(level, bool) or not 1 <= level <= 4:
        raise UserError(f"{path}: KILN['level'] must be 1, 2, 3 or 4 (KernelBench's levels), got {level!r}")
    robustness = meta.get("robustness", True)
    if not isinstance(robustness, bool):
        raise UserError(f"{path}: KILN['robustness'] must be True or False, got {robustness!r}")
    if "start" in meta and "seed" in meta:
        raise UserError(f"{path}: KILN gives both 'start' and 'seed' (its earlier name): keep 'start'")
    start_paths = _starts(meta.get("start", meta.get("seed")), path) if starts else {}
    module = (
        execute(path, tree, pristine.__name__, overrides, f"{path}: --set {_shown(overrides)}")
        if overrides
        else pristine
    )
    task = Task(
        name=name,
        path=path.resolve(),
        source=source,
        module=module,
        overrides=overrides,
        size_vars=defaults,
        workloads=[],
        op_family=meta.get("op_family"),
        tolerances=_tolerances(meta.get("tolerance"), str(path)),
        forbidden_ops=_ops(meta.get("forbidden_ops"), "forbidden_ops", str(path)),
        allowed_ops=_ops(meta.get("allowed_ops"), "allowed_ops", str(path)) or (),
        start_path=start_paths.get("cpu"),
        starts=start_paths,
        level=level,
        robustness=robustness,
    )
    task.workloads = _workloads(meta, task, tree, str(path))
    _probe(task)
    if analyze:
        task.workloads = with_derived_figures(task, task.workloads)
        if task.op_family is None:
            task.op_family = inferred_family(task)
    return task


def _shown(sizes: dict[str, Any]) -> str:
    return " ".join(f"{k}={v!r}" for k, v in sizes.items())


def _folder_level(path: Path) -> int:
    """KernelBench's layout: a file in level1/, level2/ or level3/ has that level; else 1."""
    parent = path.resolve().parent.name
    return int(parent[-1]) if parent in ("level1", "level2", "level3") else 1


def _starts(raw: Any, path: Path) -> dict[str, Path]:
    """KILN['start']: a path (the CPU starting candidate) or {platform: path}, relative to the task file."""
    if raw is None:
        return {}
    by_platform = {"cpu": raw} if isinstance(raw, str) else raw
    if not isinstance(by_platform, dict) or not all(isinstance(v, str) for v in by_platform.values()):
        raise UserError(f"{path}: KILN['start'] must be a path or a dict of platform -> path")
    starts = {}
    for platform, rel in by_platform.items():
        start_path = (path.parent / rel).resolve()
        if not start_path.is_file():
            raise UserError(f"{path}: KILN['start'] names a missing file: {start_path}")
        starts[platform] = start_path
    return starts


def _probe(task: Task) -> None:
    """Fail early, with one line, if the task cannot produce inputs or a model."""
    for workload in task.workloads:
        try:
            task.init_inputs(workload)
            task.make_inputs(workload, seed=0)
        except Exception as exc:
            raise UserError(
                f"{task.path}: workload {workload.name} ({workload.label()}): "
                f"get_inputs/get_init_inputs failed: {type(exc).__name__}: {exc}"
            ) from None
