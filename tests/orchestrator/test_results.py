"""run.json's per-task figures."""

from __future__ import annotations

import json

from kernelkiln.orchestrator.results import TaskResult, task_summary, write_outputs
from kernelkiln.store.records import Attempt, Confirmation


def test_a_confirmation_of_an_earlier_best_does_not_stand_for_the_current_one():
    seed = Attempt(task_id="t", verdict="KEEP", speedup=1.0, case={"move": "seed"})
    best = Attempt(task_id="t", verdict="KEEP", speedup=2.0, created_at=seed.created_at + 1)
    stale = Confirmation(attempt_id=seed.id, verdict="KEEP", correct=True, speedup=1.1, time_budget_s=20.0)
    assert task_summary([seed, best], None, stale).confirmed_speedup is None
    fresh = stale.model_copy(update={"attempt_id": best.id, "speedup": 1.8})
    summary = task_summary([seed, best], None, fresh)
    assert summary.confirmed_speedup == 1.8 and summary.best_speedup == 2.0
    assert summary.confirmation == fresh


def test_run_json_carries_the_runs_start_end_and_wall_time_not_its_last_attempts(tmp_path):
    seed = Attempt(task_id="t", verdict="KEEP", speedup=1.0, created_at=1000.0, case={"move": "seed"})
    result = write_outputs(tmp_path, "r-1", "done", {"t": [seed]}, started_at=990.0, ended_at=1391.0)
    assert result.wall_s == 401.0
    assert (result.started_at, result.ended_at) == ("1970-01-01T00:16:30+00:00", "1970-01-01T00:23:11+00:00")
    assert json.loads((tmp_path / "run.json").read_text())["wall_s"] == 401.0
    assert write_outputs(tmp_path, "r-1", "running", {"t": [seed]}, started_at=990.0).wall_s is None


def test_a_run_json_written_before_the_rename_reads_seed_speedup_as_the_start_speedup():
    assert TaskResult.model_validate({"seed_speedup": 0.5, "attempts": 1}).start_speedup == 0.5
    assert "start_speedup" in TaskResult(start_speedup=0.5).model_dump()
