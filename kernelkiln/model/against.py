"""Each region's kernel judged against what it replaces: the region as eager runs it and as torch.compile does.

The guard confirmed the kernel against the task's eager reference. In a model the user
compiles, the region is not run eagerly: Inductor fuses it (frozen weights, its own GEMM
template). So the kernel is timed, at each of the task's workloads, beside the reference
run eagerly and compiled with each configuration the run compares against
(``model.compilers``), interleaved on the same inputs as the guard times; it is kept only
where it beats the fastest of them beyond noise (the 10th percentile of the per-round
ratio above 1) at every workload. Each arm runs the region on ``CALLS`` input draws per
timed call: a region alone under torch.compile pays the compiled wrapper's per-call cost
(tens of microseconds) that it does not pay inside a compiled model, and on a small
region that cost alone would make the kernel look faster; the kernel pays its own
per-call cost on every draw, as it does in the model. The kernel is kernelkiln's own
code, confirmed by the guard, and runs in this process as splicing runs it.

The judge is still lenient, measured (``benchmarks/composition.py``): inside a compiled
model a kernel pays its op's dispatch on every call, and Inductor's code for the region
is cheaper there than compiled alone (fused across the region's edges). It drops the
kernels that lose even alone; the end-to-end rule (``endtoend._dropped``) decides.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from kernelkiln.model import compilers, verify
from kernelkiln.model.report import baseline, fastest_of, short_of, spread
from kernelkiln.model.splice import Kernel, load
from kernelkiln.task import load_task
from kernelkiln.task.model import Task, Workload

CALLS = 8  # the region run on this many input draws per timed call


class Repeated(torch.nn.Module):
    """The region on each of ``CALLS`` input draws in one call: compiled, the wrapper's per-call cost (guards,
    the runtime wrapper), which a region inside a compiled model does not pay, is spread over the draws."""

    def __init__(self, region: torch.nn.Module, arity: int):
        super().__init__()
        self.region = region
        self.arity = arity

    def forward(self, *inputs: Any) -> tuple[Any, ...]:
        return tuple(self.region(*inputs[k : k + self.arity]) for k in range(0, len(inputs), self.arity))


def _each(model: Callable[..., Any], draws: list[tuple[Any, ...]]) -> list[Any]:
    return [model(*d) for d in draws]


@dataclass(frozen=True)
class Against:
    """A kernel against its region's baselines at the workload where it did worst."""

    workload: str
    eager_ms: float | None = None
    compile_ms: dict[str, float] = field(default_factory=dict)
    kernel_ms: float | None = None
    vs_fastest: float | None = None  # over the fastest baseline (eager or a configuration), per-round median
    interval: tuple[float, float] | None = None  # its rounds' 10th-90th percentile
    compile_error: dict[str, str] = field(default_factory=dict)
    failure: str = ""  # why the kernel is not kept ("": it beats every baseline beyond noise)

    @property
    def fastest(self) -> str:
        """The baseline to beat: "eager" or a torch.compile configuration's name."""
        return fastest_of(self.eager_ms, self.compile_ms)


def judge(path: Path, kernel: Kernel, baselines: tuple[str, ...]) -> Against:
    """``kernel`` (the best of the task at ``path``) timed against the task's reference, eager and compiled with
    each of ``baselines``, at every workload; the workload where it did worst is reported."""
    task = load_task(path, {})
    module = load(kernel)
    worst: Against | None = None
    for workload in task.workloads:
        with _importable(task.module_for(workload)):
            got = _judged(task, workload, module, baselines)
        if got.failure:
            return got
        if worst is None or (got.vs_fastest or 0.0) < (worst.vs_fastest or 0.0):
            worst = got
    assert worst is not None  # a task has a workload
    if short_of(worst.interval) and worst.interval is not None:
        why = (
            f"not faster than its region under {baseline(worst.fastest)} beyond noise at {worst.workload} "
            f"({spread(worst.vs_fastest, worst.interval)})"
        )
        return replace(worst, failure=why)
    return worst


@contextlib.contextmanager
def _importable(module: types.ModuleType) -> Iterator[None]:
    """The task's module in ``sys.modules`` while it is compiled and timed: dynamo, inlining the region's
    ``forward`` inside ``Repeated``, imports the module it was defined in by name."""
    name = module.__name__
    if name in sys.modules:
        yield
        return
    sys.modules[name] = module
    try:
        yield
    finally:
        sys.modules.pop(name, None)


def _judged(task: Task, workload: Workload, module: types.ModuleType, baselines: tuple[str, ...]) -> Against:
    """The kernel against its region's baselines at one workload (``failure``: why it could not be timed)."""
    reference = task.make_model(workload, 0)
    new = task.make_model(workload, 0, cls=module.ModelNew)
    draws = [tuple(task.make_inputs(workload, seed)) for seed in range(CALLS)]
    inputs = tuple(x for d in draws for x in d)
    arms: dict[str, Callable[[], Any]] = {"eager": functools.partial(_each, reference, draws)}
    errors: dict[str, str] = {}
    for name in baselines:
        compiled = compilers.compile_at(Repeated(reference, len(draws[0])), inputs, name)
        if compiled.run is None:
            errors[name] = compiled.error
        else:
            arms[name] = compiled.run
    arms["kernel"] = functools.partial(_each, new, draws)
    timing = verify.time_arms(arms)
    label = workload.label() or workload.name
    if timing.blind:
        return Against(label, compile_error=errors, failure=f"not measured against its baselines: {timing.blind}")
    ms = {k: v * 1e3 / CALLS for k, v in timing.seconds.items()}
    ratio, interval = timing.versus("kernel", [a for a in arms if a != "kernel"])
    return Against(
        label,
        eager_ms=ms["eager"],
        compile_ms={n: ms[n] for n in baselines if n in ms},
        kernel_ms=ms["kernel"],
        vs_fastest=ratio,
        interval=interval,
        compile_error=errors,
    )
