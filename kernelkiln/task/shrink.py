"""``--shrink K``: a task's size variables divided by about K, as concrete ``--set`` overrides.

Only root sizes (assigned literals) are changed; derived ones follow them (kernelkiln.task.sizes).
Kernel sizes, strides, paddings, group and head counts, class counts, axes and floats are kept;
a shrunk count stays a multiple of the group/head counts its original was a multiple of (those
the module names, and those a constructor takes by default: ``num_groups=4``), and no smaller
than the task's kernel sizes. The result is checked by building the reference and
running it once per workload; when that fails, the sizes that are not batch/channel-like are
shrunk less, down to not at all.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelkiln.errors import UserError
from kernelkiln.task.loader import exec_module, load_task, read_task_source
from kernelkiln.task.sizes import execute, roots, size_vars
from kernelkiln.torch_threads import one_torch_thread

_SMALL = 8  # ints up to this are kept: axes (dim = 1), small counts, tiny batches
# Words a name's parts start with (``num_groups`` -> num, groups); matched per part, so ``head_dim`` is a size.
_KEEP = (
    "kernel",
    "stride",
    "pad",
    "dilation",
    "group",
    "heads",
    "nhead",
    "eps",
    "classes",
    "axis",
    "axes",
    "factor",
    "scale",
    "scaling",
    "layers",
    "experts",
    "topk",
    "bins",
    "window",
    "pool",
    "patch",
    "block",
    "chunk",
)
_DIVISORS = ("group", "heads", "nhead")  # what channel/embedding counts must stay multiples of
_TILES = ("pool", "patch", "window", "block", "chunk")  # what spatial sizes must stay multiples of
_KERNELS = ("kernel", "window", "pool", "patch")  # a spatial size must not drop below these
_UNBOUNDED = ("batch", "channel", "feature", "hidden", "embed", "embd", "model", "ff")  # floor 1, not the kernel
_SPATIAL = ("height", "width", "depth", "length", "len", "seq", "time", "frames", "image", "resolution")
_EXACT = {"eps"}  # whole parts only: ``steps`` is a size
_SPATIAL_NAMES = {"h", "w", "d", "l", "t", "hw"}  # a name that is one of these, whole


@dataclass(frozen=True)
class Change:
    """One size variable --shrink changed."""

    name: str
    before: Any
    after: Any


@dataclass(frozen=True)
class Shrunk:
    """What --shrink chose: the overrides to load the task with (explicit --set values included)."""

    overrides: dict[str, Any]
    changes: tuple[Change, ...]
    spatial_k: float | None = None  # set when the sizes not batch/channel-like had to be shrunk less than K
    fitted: tuple[float, float] | None = None  # a time target's choice: (the factor, the reference's seconds)

    def line(self, k: float | str, task: str | None = None) -> str:
        """``--shrink 8: batch_size 128→16, dim 16384→2048`` (without the ``kiln:`` prefix)."""
        done = ", ".join(f"{c.name} {c.before}→{c.after}" for c in self.changes) or "no size variable to shrink"
        less = ""
        if self.spatial_k is not None:
            rest = "kept" if self.spatial_k == 1 else f"divided by only {self.spatial_k:.3g}"
            less = f" (spatial and other sizes {rest}: at {k:g} the reference fails)"
        if self.fitted is not None:
            less = f" (sizes / {self.fitted[0]:.3g}: the reference's forward takes {self.fitted[1] * 1e3:.3g} ms)"
        shown = k if isinstance(k, str) else f"{k:g}"
        return f"--shrink {shown}: {task + ': ' if task else ''}{done}{less}"


def _has(name: str, words: tuple[str, ...]) -> bool:
    """Whether a part of ``name`` starts with one of ``words``; ``n_head``/``num_head`` count as heads."""
    low = name.lower()
    if "heads" in words and re.search(r"(^|_)(n|num)_head($|_)", low):
        return True
    if words is _SPATIAL and low in _SPATIAL_NAMES:
        return True
    parts = [p for p in re.split(r"[_\d]+", low) if p]
    return any(p == w if w in _EXACT else p.startswith(w) for p in parts for w in words)


def _kept(name: str) -> bool:
    return _has(name, _KEEP)


def _ints(value: Any) -> list[int]:
    items = value if isinstance(value, (tuple, list)) else [value]
    return [x for x in items if isinstance(x, int) and not isinstance(x, bool)]


def _scaled(value: int, factor: float, floor: int, multiple: int) -> int:
    if value <= _SMALL or factor == 1:
        return value
    new = max(min(floor, value), round(value / factor), 1)
    if multiple > 1:
        new = max(multiple, round(new / multiple) * multiple)
    return new


def _one(x: Any, factor: float, floor: int, dividing: list[int]) -> Any:
    if not isinstance(x, int) or isinstance(x, bool):
        return x
    return _scaled(x, factor, floor, math.lcm(*[d for d in dividing if x % d == 0] or [1]))


def _plan(
    base: dict[str, Any], shrinkable: set[str], k: float, spatial_k: float, defaults: dict[str, int] | None = None
) -> dict[str, Any]:
    """New values for the shrinkable names: ``k`` for batch/channel-like names, ``spatial_k`` for the rest.

    ``defaults``: integer defaults of the task's constructors (``_defaults``), whose group and head
    counts bind as the module's own do."""
    kept = {n: v for n, v in base.items() if n not in shrinkable or _kept(n)}

    def values(words: tuple[str, ...]) -> list[int]:
        named = [*kept.items(), *(defaults or {}).items()]
        return [x for n, v in named if _has(n, words) for x in _ints(v) if x > 1]

    divisors, tiles, kernel = values(_DIVISORS), values(_TILES), max(values(_KERNELS), default=1)
    out: dict[str, Any] = {}
    for name, value in base.items():
        if name in kept or isinstance(value, bool) or not isinstance(value, (int, tuple, list)):
            continue  # floats (probabilities, eps, scales), strings and flags keep their meaning
        factor, floor = (k, 1) if _has(name, _UNBOUNDED) else (spatial_k, kernel)
        dividing = [] if _has(name, ("batch",)) else tiles if _has(name, _SPATIAL) else divisors
        if isinstance(value, (tuple, list)):  # element-wise
            new = type(value)(_one(x, factor, floor, dividing) for x in value)
        else:
            new = _one(value, factor, floor, dividing)
        if new != value:
            out[name] = new
    return out


def _failure(path: Path, overrides: dict[str, Any]) -> str | None:
    """Why the reference cannot be built or run at ``overrides`` (None: it runs)."""
    import torch

    with warnings.catch_warnings():  # the task's own warnings come again when it is loaded for the command
        warnings.simplefilter("ignore")
        try:
            task = load_task(path, overrides, analyze=False)
        except UserError as exc:
            return str(exc)
        for workload in task.workloads:
            try:
                model = task.make_model(workload, seed=0)
                with torch.no_grad():
                    model(*task.make_inputs(workload, seed=0))
            except UserError as exc:
                return str(exc)
            except Exception as exc:
                return str(task.reference_failure(workload, exc))
    return None


def parse_shrink(text: str) -> float | str:
    """``--shrink``'s value: a factor (``8``) or a time target (``20ms``, ``0.5s``: kept as given)."""
    value = text.strip().lower()
    match = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)", value)
    if match:
        seconds = float(match[1]) * (1e-3 if match[2] == "ms" else 1.0)
        if seconds <= 0:
            raise UserError(f"--shrink {text}: a time target must be more than 0")
        return value
    try:
        return float(value)
    except ValueError:
        raise UserError(
            f"--shrink takes a factor (--shrink 8) or a time for the reference's forward (--shrink 20ms), not {text!r}"
        ) from None


def target_seconds(value: str) -> float:
    """``20ms`` as 0.02."""
    return float(value[:-2]) * 1e-3 if value.endswith("ms") else float(value[:-1])


def _timed(path: Path, overrides: dict[str, Any]) -> float | None:
    """The reference's forward time on one thread at ``overrides``, the slowest workload's best of four runs
    (None: it fails).

    The first calls of a fresh module can take milliseconds more than the rest (oneDNN primitives created
    on first use): timed alone, they made a tiny Conv3d look slower than 20 ms."""
    import time

    import torch

    if _failure(path, overrides) is not None:  # builds and runs each workload once: the warm-up
        return None
    with warnings.catch_warnings(), one_torch_thread():
        warnings.simplefilter("ignore")
        task = load_task(path, overrides, analyze=False)
        slowest = 0.0
        for workload in task.workloads:
            model, inputs = task.make_model(workload, seed=0), task.make_inputs(workload, seed=0)
            best = math.inf
            for _ in range(4):
                started = time.perf_counter()
                with torch.no_grad():
                    model(*inputs)
                best = min(best, time.perf_counter() - started)
            slowest = max(slowest, best)
    return slowest


def fit(path: str | Path, target: str, explicit: dict[str, Any] | None = None) -> Shrunk:
    """The overrides that bring the reference's forward to about ``target`` (``20ms``) or under: every size
    divided by the smallest factor (1 to 4096, steps of √2) at which it runs that fast.

    Factors are tried from the largest down, so no probe runs the full-size reference unless the sizes
    are already small; a factor at which the reference fails (a group count no longer dividing) is skipped.
    """
    path = Path(path)
    seconds = target_seconds(target)
    base, shrinkable, explicit = _sizes(path, explicit)
    defaults = _defaults(path)
    best: tuple[float, dict[str, Any], float] | None = None
    tried: list[dict[str, Any]] = []
    for step in range(24, -1, -1):
        k = 2 ** (step / 2)
        plan = _plan(base, shrinkable, k, k, defaults)
        if plan in tried:
            continue
        tried.append(plan)
        took = _timed(path, {**plan, **explicit})
        if took is None:
            continue
        if took > seconds and best is not None:
            break
        best = (k, plan, took)
        if took > seconds:  # even the smallest sizes are slower than the target: they are what there is
            break
    if best is None:
        raise UserError(f"{path}: --shrink {target}: the reference fails at every size tried; choose sizes with --set")
    k, plan, took = best
    changes = tuple(Change(n, base[n], v) for n, v in plan.items())
    return Shrunk({**plan, **explicit}, changes, fitted=(k, took))


def _sizes(path: Path, explicit: dict[str, Any] | None) -> tuple[dict[str, Any], set[str], dict[str, Any]]:
    """The task's size variables (after ``explicit``), those --shrink may change, and ``explicit``."""
    explicit = dict(explicit or {})
    source = read_task_source(path)
    module = exec_module(path, source, f"kiln_task_{path.stem}")  # a syntax error is one line here
    tree = ast.parse(source)
    known = size_vars(tree, module.__dict__)
    unknown = sorted(set(explicit) - set(known))
    if unknown:
        raise UserError(
            f"{path}: --set {unknown[0]}: no such module-level size variable "
            f"(known: {', '.join(sorted(known)) or 'none'})"
        )
    if explicit:
        module = execute(path, tree, module.__name__, explicit, f"{path}: --set")
    base = {n: module.__dict__.get(n) for n in known}
    return base, (roots(tree) & set(known)) - set(explicit), explicit


def _defaults(path: Path) -> dict[str, int]:
    """The integer defaults of every constructor in ``path`` (``num_groups=4``), by parameter name."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(read_task_source(path))):
        if isinstance(node, ast.FunctionDef) and node.name == "__init__":
            args = node.args
            named = [*args.posonlyargs, *args.args][-len(args.defaults) :] if args.defaults else []
            pairs = [*zip(named, args.defaults, strict=True), *zip(args.kwonlyargs, args.kw_defaults, strict=True)]
            for arg, default in pairs:
                if isinstance(default, ast.Constant) and type(default.value) is int:
                    found[arg.arg] = default.value
    return found


def shrink(path: str | Path, k: float, explicit: dict[str, Any] | None = None) -> Shrunk:
    """The overrides that divide ``path``'s sizes by about ``k``; ``explicit`` (--set) values win and are kept.

    Raises a one-line UserError when even the most cautious choice does not run the reference.
    """
    path = Path(path)
    if not (isinstance(k, (int, float)) and math.isfinite(k) and k > 0):
        raise UserError(f"--shrink takes a positive number (e.g. --shrink 8 divides sizes by about 8), not {k!r}")
    base, shrinkable, explicit = _sizes(path, explicit)
    defaults = _defaults(path)
    first: str | None = None
    spatial_k = k
    while True:
        plan = _plan(base, shrinkable, k, spatial_k, defaults)
        overrides = {**plan, **explicit}
        why = _failure(path, overrides) if plan else None
        if why is None:
            return Shrunk(
                overrides, tuple(Change(n, base[n], v) for n, v in plan.items()), spatial_k if spatial_k != k else None
            )
        first = first or why
        if spatial_k <= 1:
            break
        spatial_k = max(1.0, spatial_k / 2) if k > 1 else 1.0
    shown = ", ".join(f"{n}={v}" for n, v in _plan(base, shrinkable, k, k, defaults).items())
    raise UserError(f"{path}: --shrink {k:g} ({shown}): {_tail(first, path)}; choose sizes with --set NAME=VALUE")


def _tail(message: str, path: Path) -> str:
    """``message`` without a leading path, which the caller already names."""
    for prefix in (f"{path.resolve()}: ", f"{path}: "):
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message
