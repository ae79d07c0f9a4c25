"""torch.compile as a baseline: how much faster the compiled reference is than eager.

Both are trusted code (the task's own reference), so the parent times them itself,
interleaved round by round, with the guard's thread count. Only the ratio
t_eager / t_compiled is used: a candidate's speedup over torch.compile is its speedup
over eager (measured by the guard) divided by it. Inputs stay warm here, for both.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

import torch

from kernelkiln.task import Task

_ROUNDS = 9
_BATCH_S = 0.005


def _batch(fn: Callable, inputs: list, reps: int) -> float:
    start = time.perf_counter()
    for _ in range(reps):
        fn(*inputs)
    return (time.perf_counter() - start) / reps


def _reps(fn: Callable, inputs: list) -> int:
    reps = 1
    while _batch(fn, inputs, reps) * reps < _BATCH_S and reps < 1 << 16:
        reps *= 2
    return reps


def compile_ratio(task: Task, threads: int, compiler: Callable = torch.compile) -> tuple[float | None, str]:
    """(t_eager / t_compiled as a geometric mean over workloads, or None, and why it is None)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        logs = []
        for workload in task.workloads:
            model = task.make_model(workload, seed=0)
            inputs = task.make_inputs(workload, 0)
            with torch.no_grad():
                try:
                    compiled = compiler(model)
                    compiled(*inputs)  # compiles
                except Exception as exc:
                    return None, f"torch.compile failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                reps = max(_reps(model, inputs), _reps(compiled, inputs))
                ratios = []
                for rnd in range(_ROUNDS):
                    first, second = (model, compiled) if rnd % 2 else (compiled, model)
                    t_first, t_second = _batch(first, inputs, reps), _batch(second, inputs, reps)
                    t_eager, t_compiled = (t_first, t_second) if first is model else (t_second, t_first)
                    ratios.append(math.log(t_eager / t_compiled))
                logs.append(statistics.median(ratios))
        return math.exp(sum(logs) / len(logs)), ""
    finally:
        torch.set_num_threads(previous)
