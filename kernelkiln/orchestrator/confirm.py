"""The confirmation: a task's best, re-evaluated from scratch with a longer timing budget.

A search evaluation times for a few seconds, so its speedup carries that noise (±30% on
a busy 2-core machine), and the best is, by selection, the attempt whose noise fell
kindest. The figure a run reports for a task is its best candidate judged again — gate,
build, checks and timing against the reference — in a fresh session that times for
``confirm_time_budget_s``.
"""

from __future__ import annotations

from kernelkiln.evaluation.pool import EvaluationInput
from kernelkiln.guard.verdict import Verdict
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.store.records import Attempt, Confirmation
from kernelkiln.task import Task


def confirmable(best: Attempt | None, config: OptimizeConfig) -> bool:
    """Whether ``best`` will be confirmed: there is one, it was timed, and confirmation is on."""
    return best is not None and bool(best.measurements) and bool(config.confirm_time_budget_s)


def confirmation_input(task: Task, best: Attempt | None, config: OptimizeConfig) -> EvaluationInput | None:
    """What the pool judges to confirm ``best`` (its guard times for longer), or None when it is not ``confirmable``."""
    if best is None or not confirmable(best, config):
        return None
    guard = config.guard.model_copy(update={"time_budget_s": config.confirm_time_budget_s})
    return EvaluationInput(task, guard, best.code)


def confirmation(best: Attempt, item: EvaluationInput, verdict: Verdict) -> Confirmation:
    """The record of ``best``'s confirmation, from the verdict on ``item``."""
    return Confirmation(
        attempt_id=best.id,
        verdict=verdict.verdict,
        correct=verdict.correct,
        speedup=verdict.speedup if verdict.correct else None,
        reason=verdict.reason if (not verdict.correct or verdict.unmeasured) else "",
        time_budget_s=item.guard.time_budget_s,
        workloads={w.name: w.speedup for w in verdict.workloads},
    )
