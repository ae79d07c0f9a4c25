"""The Task record: a loaded reference module plus its workloads and metadata."""

from __future__ import annotations

import ast
import contextlib
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelkiln.errors import UserError
from kernelkiln.task.sizes import execute, first_line
from kernelkiln.task.sizes import key as sizes_key

if TYPE_CHECKING:
    import torch

BINDING = threading.RLock()  # see Task.bound

# Per-dtype defaults; a task may override them in KILN["tolerance"].
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (2e-2, 2e-2),
}


@dataclass(frozen=True)
class Tolerance:
    """Absolute and relative tolerance for one dtype; ``explicit`` when the task's KILN gave it."""

    atol: float
    rtol: float
    explicit: bool = False


@dataclass(frozen=True)
class Workload:
    """One setting of the task's module-level size variables."""

    name: str
    sizes: dict[str, Any]
    flops: float | None = None
    bytes: float | None = None

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.sizes.items()) or self.name

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "sizes": dict(self.sizes), "flops": self.flops, "bytes": self.bytes}


def widen(x: Any, seed: int, position: int) -> Any:
    """``x`` redrawn as normal noise centred on its mean with twice its spread (or its mean's size).

    Non-negative inputs (``torch.rand``) gain negative values and every input larger ones, so
    a candidate that relies on get_inputs' own domain (ReLU as identity on positive inputs)
    fails; deterministic in ``seed``, so the parent and a worker draw identical tensors.
    """
    import torch

    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
        return x
    std, mean = (float(v) for v in torch.std_mean(x.detach().float(), correction=0))
    spread = 2.0 * max(std, abs(mean)) or 1.0
    generator = torch.Generator().manual_seed((seed * 1_000_003 + position) % (1 << 63))
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    noise = torch.randn(x.shape, generator=generator, dtype=wide) * spread + mean
    return torch.empty_like(x, requires_grad=False).copy_(noise)


@dataclass
class Task:
    """A reference computation in KernelBench format, ready to instantiate per workload."""

    name: str
    path: Path
    source: str
    module: types.ModuleType  # run at the task's own sizes, --set applied; see module_for
    overrides: dict[str, Any]
    size_vars: dict[str, Any]
    workloads: list[Workload]
    op_family: str | None = None
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    forbidden_ops: tuple[str, ...] | None = None
    allowed_ops: tuple[str, ...] = ()
    start_path: Path | None = None  # the CPU starting candidate
    starts: dict[str, Path] = field(default_factory=dict)  # starting candidate per platform
    level: int = 1  # KernelBench's: 1 single op, 2 fusion, 3 block; a suite runs easier levels first
    robustness: bool = True  # KILN["robustness"]: False when inputs must come from get_inputs' own domain
    modules: dict[str, types.ModuleType] = field(default_factory=dict, repr=False, compare=False)  # by sizes

    @property
    def id(self) -> str:
        """The task's id in memory and in measured spaces: its name, plus its overrides when it has any."""
        if not self.overrides:
            return self.name
        return self.name + "[" + ",".join(f"{k}={v}" for k, v in sorted(self.overrides.items())) + "]"

    def start_for(self, platform: str) -> Path | None:
        """The starting candidate for ``platform`` (None when the task has none for it)."""
        return self.starts.get(platform)

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        key = str(dtype).removeprefix("torch.")
        if key in self.tolerances:
            return self.tolerances[key]
        atol, rtol = DEFAULT_TOLERANCES.get(key, (0.0, 0.0))
        return Tolerance(atol, rtol)

    def module_for(self, workload: Workload) -> types.ModuleType:
        """The task module run at ``workload``'s sizes (made once, then cached): its derived values follow them."""
        with BINDING:
            module = self.modules.get(sizes_key(workload.sizes))
            if module is None:
                where = f"{self.path}: workload {workload.name} ({workload.label()})"
                module = execute(self.path, ast.parse(self.source), self.module.__name__, workload.sizes, where)
                self.modules[sizes_key(workload.sizes)] = module
            return module

    @contextlib.contextmanager
    def bound(self, workload: Workload) -> Iterator[types.ModuleType]:
        """Hold the binding lock and give the module at this workload's sizes.

        The lock is process-wide: torch's global RNG (which ``get_inputs`` draws from) is
        shared by every thread, and the agents of one run generate inputs and reference
        outputs in parallel threads.
        """
        with BINDING:
            yield self.module_for(workload)

    def make_inputs(self, workload: Workload, seed: int, wide: bool = False) -> list[Any]:
        """The workload's inputs, generated deterministically from ``seed``.

        ``wide``: the same shapes, dtypes and layouts, every floating tensor redrawn from a
        wider distribution (robustness trials); integer, bool and non-tensor inputs unchanged.
        """
        import torch  # here, not at the top: `kiln --help` should not wait for torch

        with self.bound(workload) as module:
            torch.manual_seed(seed)
            inputs = list(module.get_inputs())
        return [widen(x, seed, j) for j, x in enumerate(inputs)] if wide else inputs

    def init_inputs(self, workload: Workload) -> list[Any]:
        with self.bound(workload) as module:
            return list(module.get_init_inputs())

    def make_model(self, workload: Workload, seed: int, cls: type | None = None) -> torch.nn.Module:
        """Construct ``cls`` (default: the reference ``Model`` of the workload's module) the way KernelBench
        does: seeded init."""
        import torch

        with self.bound(workload) as module:
            args = list(module.get_init_inputs())
            torch.manual_seed(seed)
            model: torch.nn.Module = (cls or module.Model)(*args)
        return model.eval()

    @contextlib.contextmanager
    def built(self, workload: Workload, device: str) -> Iterator[tuple[torch.nn.Module, list[Any]]]:
        """The reference and its inputs at ``workload`` (seed 0) made on ``device``, to run under no_grad there.

        On the meta device this costs no data and no compute: what the load-time analyses run
        (kernelkiln.task.reference_calls, kernelkiln.task.roofline).
        """
        import torch

        with self.bound(workload), torch.device(device), torch.no_grad():
            yield self.make_model(workload, seed=0), self.make_inputs(workload, seed=0)

    def reference_failure(self, workload: Workload, exc: BaseException) -> UserError:
        """The one-line error for a reference that cannot be built or run at ``workload``'s sizes."""
        return UserError(
            f"{self.path}: workload {workload.name} ({workload.label()}): the reference fails at "
            f"these sizes: {type(exc).__name__}: {first_line(exc)}"
        )

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "op_family": self.op_family,
            "workloads": [w.to_dict() for w in self.workloads],
            "start": str(self.start_path) if self.start_path else None,
            "starts": {k: str(v) for k, v in self.starts.items()},
            "level": self.level,
        }
