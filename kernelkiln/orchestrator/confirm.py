"""The confirmation: a task's best, re-evaluated from scratch with a longer timing budget.

A search evaluation times for a few seconds, so its speedup carries that noise (±30% on
a busy 2-core machine), and the best is, by selection, the attempt whose noise fell
kindest. The figure a run reports for a task is its best candidate judged again — gate,
build, checks and timing against the reference — in a fresh session that times for
``confirm_time_budget_s``.
"""

from __future__ import annotations

from typing import Any

from kernelkiln.guard.device import DeviceLock
from kernelkiln.guard.session import GuardSession
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.store.records import Attempt
from kernelkiln.task import Task


def confirm(task: Task, best: Attempt | None, config: OptimizeConfig, device: DeviceLock) -> dict[str, Any] | None:
    """The best's confirmation record, or None (no best, an untimed best, or confirmation turned off)."""
    budget = config.confirm_time_budget_s
    if best is None or not budget or not best.measurements:
        return None
    guard = config.guard.model_copy(update={"time_budget_s": budget})
    with GuardSession(task, guard, device) as session:
        verdict = session.evaluate(best.code)
    return {"attempt_id": best.id, "verdict": verdict.verdict, "correct": verdict.correct,
            "speedup": verdict.speedup if verdict.correct else None,
            "reason": "" if verdict.correct else verdict.reason, "time_budget_s": budget,
            "workloads": {w.name: w.speedup for w in verdict.workloads}}
