"""run.json's per-task figures."""

from __future__ import annotations

from kernelkiln.orchestrator.results import task_summary
from kernelkiln.store.records import Attempt, Confirmation


def test_a_confirmation_of_an_earlier_best_does_not_stand_for_the_current_one():
    seed = Attempt(task_id="t", verdict="KEEP", speedup=1.0, case={"move": "seed"})
    best = Attempt(task_id="t", verdict="KEEP", speedup=2.0, created_at=seed.created_at + 1)
    stale = Confirmation(attempt_id=seed.id, verdict="KEEP", correct=True, speedup=1.1, time_budget_s=20.0)
    assert task_summary([seed, best], None, stale)["confirmed_speedup"] is None
    fresh = stale.model_copy(update={"attempt_id": best.id, "speedup": 1.8})
    summary = task_summary([seed, best], None, fresh)
    assert summary["confirmed_speedup"] == 1.8 and summary["best_speedup"] == 2.0
    assert summary["confirmation"] == fresh.model_dump(mode="json")
