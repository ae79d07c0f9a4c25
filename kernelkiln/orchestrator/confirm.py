"""The confirmation: a task's best, re-evaluated from scratch with a longer timing budget.

A search evaluation times for a few seconds, so its speedup carries that noise (±30% on
a busy 2-core machine), and the best is, by selection, the attempt whose noise fell
kindest. The figure a run reports for a task is its best candidate judged again — gate,
build, checks and timing against the reference — in a fresh session that times for
``confirm_time_budget_s``.
"""

from __future__ import annotations

from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.pool import EvaluationPool
from kernelkiln.store.records import Attempt, Confirmation
from kernelkiln.task import Task


def confirmable(best: Attempt | None, config: OptimizeConfig) -> bool:
    """Whether ``best`` will be confirmed: there is one, it was timed, and confirmation is on."""
    return best is not None and bool(best.measurements) and bool(config.confirm_time_budget_s)


def confirm(task: Task, best: Attempt | None, config: OptimizeConfig, pool: EvaluationPool) -> Confirmation | None:
    """The best's confirmation record, or None when it is not ``confirmable``."""
    if not confirmable(best, config):
        return None
    budget = config.confirm_time_budget_s
    guard = config.guard.model_copy(update={"time_budget_s": budget})
    session = pool.evaluator(task, guard)
    try:
        verdict = session.evaluate(best.code)
    finally:
        session.close()
    return Confirmation(
        attempt_id=best.id,
        verdict=verdict.verdict,
        correct=verdict.correct,
        speedup=verdict.speedup if verdict.correct else None,
        reason="" if verdict.correct else verdict.reason,
        time_budget_s=budget,
        workloads={w.name: w.speedup for w in verdict.workloads},
    )
