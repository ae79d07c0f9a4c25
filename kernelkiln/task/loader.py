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

_REQUIRED = ("Model", "get_inputs", "get_init_inputs")
_KILN_KEYS = {
    "op_family", "workloads", "tolerance", "flops", "bytes", "forbidden_ops", "allowed_ops", "seed", "level",
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


def _size_vars(tree: ast.Module, namespace: dict[str, Any]) -> dict[str, Any]:
    """Module-level names assigned a plain scalar: the knobs ``--set`` may change."""
    names: dict[str, Any] = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        for target in targets:
            if isinstance(target, ast.Name) and not target.id.startswith("_") and target.id != "KILN":
                value = namespace.get(target.id)
                if isinstance(value, (int, float, bool, str)):
                    names[target.id] = value
    return names


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


def _workloads(meta: dict, size_vars: dict[str, Any], overrides: dict[str, Any], where: str) -> list[Workload]:
    specs = meta.get("workloads") or [{}]
    if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
        raise UserError(f"{where}: KILN['workloads'] must be a list of dicts of size variables")
    workloads = []
    for i, spec in enumerate(specs):
        spec = dict(spec)
        name = str(spec.pop("name", f"w{i}"))
        unknown = set(spec) - set(size_vars)
        if unknown:
            raise UserError(f"{where}: workload {name!r} sets unknown size variable(s): {', '.join(sorted(unknown))}")
        sizes = {**size_vars, **spec, **overrides}
        workloads.append(Workload(
            name=name,
            sizes=sizes,
            flops=_metric(meta.get("flops"), sizes, "flops", where),
            bytes=_metric(meta.get("bytes"), sizes, "bytes", where),
        ))
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


def exec_module(path: Path, source: str, name: str, before_exec: Callable[[dict], None] | None = None) -> types.ModuleType:
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
    except Exception as exc:
        raise UserError(f"{path}: failed to import: {type(exc).__name__}: {exc}") from None
    return module


def load_task(path: str | Path, overrides: dict[str, Any] | None = None, infer_family: bool = True) -> Task:
    """Load a task file; ``overrides`` (from ``--set``) replace module-level size variables.

    Without ``KILN["op_family"]``, the family is inferred from the reference's calls
    (kernelkiln.task.reference_calls) unless ``infer_family`` is False (a guard worker).
    """
    path = Path(path)
    overrides = dict(overrides or {})
    if not path.is_file():
        raise UserError(f"task file not found: {path}")
    try:
        source = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read task file {path}: {exc}") from None
    name = path.stem
    module = exec_module(path, source, f"kiln_task_{name}")
    missing = [n for n in _REQUIRED if not hasattr(module, n)]
    if missing:
        raise UserError(f"{path}: not a KernelBench task: missing {', '.join(missing)}")
    size_vars = _size_vars(ast.parse(source), module.__dict__)
    unknown = set(overrides) - set(size_vars)
    if unknown:
        known = ", ".join(sorted(size_vars)) or "none"
        raise UserError(f"{path}: --set {sorted(unknown)[0]}: no such module-level size variable (known: {known})")
    meta = getattr(module, "KILN", {}) or {}
    if not isinstance(meta, dict):
        raise UserError(f"{path}: KILN must be a dict")
    extra = set(meta) - _KILN_KEYS
    if extra:
        raise UserError(f"{path}: unknown KILN key(s): {', '.join(sorted(extra))} (known: {', '.join(sorted(_KILN_KEYS))})")
    level = meta.get("level", 1)
    if not isinstance(level, int) or isinstance(level, bool) or not 1 <= level <= 4:
        raise UserError(f"{path}: KILN['level'] must be 1, 2, 3 or 4 (KernelBench's levels), got {level!r}")
    robustness = meta.get("robustness", True)
    if not isinstance(robustness, bool):
        raise UserError(f"{path}: KILN['robustness'] must be True or False, got {robustness!r}")
    seeds = _seeds(meta.get("seed"), path)
    task = Task(
        name=name,
        path=path.resolve(),
        source=source,
        module=module,
        overrides=overrides,
        size_vars=size_vars,
        workloads=_workloads(meta, size_vars, overrides, str(path)),
        op_family=meta.get("op_family"),
        tolerances=_tolerances(meta.get("tolerance"), str(path)),
        forbidden_ops=_ops(meta.get("forbidden_ops"), "forbidden_ops", str(path)),
        allowed_ops=_ops(meta.get("allowed_ops"), "allowed_ops", str(path)) or (),
        seed_path=seeds.get("cpu"),
        seeds=seeds,
        level=level,
        robustness=robustness,
    )
    _probe(task)
    if task.op_family is None and infer_family:
        task.op_family = inferred_family(task)
    return task


def _seeds(raw: Any, path: Path) -> dict[str, Path]:
    """KILN['seed']: a path (the CPU seed) or {platform: path}; paths are relative to the task file."""
    if raw is None:
        return {}
    by_platform = {"cpu": raw} if isinstance(raw, str) else raw
    if not isinstance(by_platform, dict) or not all(isinstance(v, str) for v in by_platform.values()):
        raise UserError(f"{path}: KILN['seed'] must be a path or a dict of platform -> path")
    seeds = {}
    for platform, rel in by_platform.items():
        seed_path = (path.parent / rel).resolve()
        if not seed_path.is_file():
            raise UserError(f"{path}: KILN['seed'] names a missing file: {seed_path}")
        seeds[platform] = seed_path
    return seeds


def _probe(task: Task) -> None:
    """Fail early, with one line, if the task cannot produce inputs or a model."""
    for workload in task.workloads:
        try:
            task.init_inputs(workload)
            task.make_inputs(workload, seed=0)
        except Exception as exc:
            raise UserError(
                f"{task.path}: workload {workload.name} ({workload.label()}): "
                f"get_inputs/get_init_inputs failed: {type(exc).__name__}: {exc}") from None
