"""Is the reference contended? Once per session at N threads: the reference against itself at one thread.

A reference that runs markedly slower with more threads is fighting for its cores (a busy
or oversubscribed machine): every speedup against it would be false, so the session then
times everything at one thread (``GuardSession``), and says so in each verdict.
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING

from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.measurement import placement
from kernelkiln.guard.measurement.timing import Series, Timer, rse
from kernelkiln.guard.worker.workers import Worker
from kernelkiln.platforms import Platform
from kernelkiln.task import Task

if TYPE_CHECKING:
    import torch

PROBE_S = 2.0  # the probe's timing budget
CONTENDED = 1.10  # a reference this much slower at N threads than at one (and beyond its noise) is fighting for cores


def probe(
    task: Task,
    ref_models: dict[int, torch.nn.Module],
    at_n: Worker,
    at_one: Worker,
    config: GuardConfig,
    platform: Platform,
    threads: int,
    guard_cores: list[int] | None,
) -> str:
    """Why the reference worker ``at_n`` (``threads`` threads) must not be timed, or ``""``: it is not contended.

    Timed at ``threads``: the CPU bound is the N-thread reference's (the one-thread worker's
    is then an underestimate, and its wall clock binds).
    """
    with placement.pinned(guard_cores):
        series = Timer(task, ref_models, {"ref": at_n, "cand": at_one}, config, platform, threads).run(0, PROBE_S)
    return contended(series, threads, config)


def contended(series: Series, threads: int, config: GuardConfig) -> str:
    """Why the reference timed at ``threads`` (role "ref") against itself at one thread (role "cand")
    must not be used, or ``""``: it ran markedly slower with more threads, beyond its noise."""
    if series.blind:
        return (
            f"the reference could not be timed cleanly at {threads} threads against one ({series.blind}): "
            "every figure is timed at 1 thread"
        )
    logs = series.log_ratios("ref", "cand")  # log(t at `threads` / t at one)
    slower = math.exp(statistics.median(logs))
    margin = max(math.log(CONTENDED), min(config.max_margin, config.margin_sigmas * rse(logs)))
    if math.log(slower) <= margin:
        return ""
    return (
        f"the reference ran {slower:.2f}x slower at {threads} threads than at one (noise band ±{margin:.1%}): its "
        "cores are contended, so every figure is timed at 1 thread"
    )
