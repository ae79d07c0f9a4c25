"""The torch functions a task's reference calls, recorded once at load to infer its op family.

The guard records the reference's ops too, with the same recorder (kernelkiln.task.calls),
but only when a session starts, after the orchestrator has handed out lenses. This runs the
forward once, first on the meta device (no data, no compute, so the size of a KernelBench
workload costs nothing), then, when an op has no meta kernel or the forward reads a value,
once on CPU on the smallest workload. The meta device's first use imports torch's meta
registrations (under a second, once per process), which a guard session imports anyway. It
runs only what a guard session already runs in the parent process (the reference's __init__
and forward), and never fails: any error means "unknown".
"""

from __future__ import annotations

import math
import warnings
from typing import TYPE_CHECKING

from kernelkiln.task.calls import record_calls
from kernelkiln.task.family import family_of

if TYPE_CHECKING:
    from kernelkiln.task.model import Task, Workload


def _smallest(task: Task) -> Workload:
    """The workload whose numeric size variables have the smallest product (a cheap proxy for its cost)."""

    def size(w: Workload) -> float:
        return math.prod(
            abs(v) for v in w.sizes.values() if isinstance(v, (int, float)) and not isinstance(v, bool) and v
        )

    return min(task.workloads, key=size)


def _calls_on(task: Task, workload: Workload, device: str) -> list[str]:
    with task.built(workload, device) as (model, inputs):
        return list(record_calls(model, inputs).elements())


def reference_calls(task: Task) -> list[str] | None:
    """The names of the torch functions the reference's forward calls, with repeats; None if it cannot run."""
    workload = _smallest(task)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for device in ("meta", "cpu"):
            try:
                return _calls_on(task, workload, device)
            except Exception:
                continue
    return None


def inferred_family(task: Task) -> str | None:
    """The op family of ``task``'s reference, from its calls (kernelkiln.task.family); None when unknown."""
    try:
        calls = reference_calls(task)
        return family_of(calls) if calls else None
    except Exception:
        return None
