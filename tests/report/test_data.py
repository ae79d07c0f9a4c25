"""Collecting a report: attempts as points, the best path, memory growth, rules, and run.json alone."""

from __future__ import annotations

import json

import pytest

from kernelkiln.errors import UserError
from kernelkiln.report.data import attempt_sol, collect
from kernelkiln.store import open_store
from kernelkiln.store.records import Measurement
from kernelkiln.testing.memory_fakes import attempt

from .conftest import HOSTILE, START


def report_of(url, *targets):
    store = open_store(url)
    try:
        return collect(list(targets), store)
    finally:
        store.close()


def test_points_follow_the_judged_order_with_agent_lens_verdict_speedup_and_objective(stored):
    url, run_id, _, made = stored
    run = report_of(url, run_id).runs[0]
    assert [t.task_id for t in run.tasks] == ["softmax", "row_sum"] and run.status == "done"
    softmax = run.tasks[0]
    assert [p.index for p in softmax.points] == [1, 2, 3, 4, 5]
    assert [p.verdict for p in softmax.points] == ["KEEP", "REVERT", "REJECT", "ACCEPT", "KEEP"]
    assert softmax.points[2].speedup is None and softmax.points[2].summary == HOSTILE
    assert [p.drafting for p in softmax.points] == [False, False, False, False, True]
    assert softmax.points[1].parent_id == made["seed"].id and softmax.points[0].lens == "general"
    assert softmax.agents == ("a1", "a2")


def test_the_run_figures_are_run_json_s(stored):
    url, run_id, out, _ = stored
    run = report_of(url, run_id).runs[0]
    expected = json.loads((out / "run.json").read_text())["tasks"]
    for task in run.tasks:
        assert (task.best_speedup, task.start_speedup, task.attempts, task.verdicts) == (
            expected[task.task_id]["best_speedup"],
            expected[task.task_id]["seed_speedup"],
            expected[task.task_id]["attempts"],
            expected[task.task_id]["verdicts"],
        )
    assert run.tasks[1].best_over_start == pytest.approx(1.5)


def test_the_best_path_runs_from_the_root_to_the_latest_keep(stored):
    url, run_id, _, made = stored
    softmax = report_of(url, run_id).runs[0].tasks[0]
    assert softmax.best_path == (made["seed"].id, made["flat"].id, made["draft"].id)


def test_memory_growth_counts_the_experiences_before_and_those_written_during_the_run(stored):
    url, run_id, _, _ = stored
    run = report_of(url, run_id).runs[0]
    assert run.experiences_before == 1
    assert run.growth[0] == (0.0, 1) and run.growth[-1] == (20.0, 2)


def test_resident_rules_come_with_their_value_and_priority(stored):
    url, run_id, _, _ = stored
    (rules,) = report_of(url, run_id).rules.values()
    assert [(r.id, r.q, r.tokens) for r in rules] == [("e-during", 0.4, 10)]
    assert rules[0].priority == pytest.approx(0.4 * 0.5 / 10)


def test_a_dir_is_reported_from_the_store_when_its_run_is_stored(stored):
    url, _, out, _ = stored
    run = report_of(url, str(out)).runs[0]
    assert run.history and run.tasks[0].points and run.out == str(out)


def test_a_dir_whose_run_is_not_stored_is_an_error_naming_the_store_and_allow_missing(stored, tmp_path):
    _, _, out, _ = stored
    other = f"sqlite:///{tmp_path / 'other.db'}"
    with pytest.raises(UserError, match=r"run r-test of .* is not in store sqlite:///.*other\.db.*--allow-missing"):
        report_of(other, str(out))


def test_with_allow_missing_a_dir_whose_run_is_not_stored_renders_run_json_and_says_the_rest_is_unavailable(
    stored, tmp_path
):
    _, _, out, _ = stored
    store = open_store(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        run = collect([str(out)], store, allow_missing=True).runs[0]
    finally:
        store.close()
    assert not run.history and "unavailable" in run.note and run.run_id == "r-test" and run.source == ""
    assert run.tasks[0].best_speedup == 0.9 and run.tasks[0].points == ()


def test_the_wall_time_runs_from_the_start_to_when_the_run_stopped_not_to_its_last_attempt(stored):
    url, run_id, out, _ = stored
    assert report_of(url, run_id).runs[0].wall_s == 7  # stored before runs kept their end: the last attempt's
    store = open_store(url)
    try:
        with store.write() as conn:
            run = store.runs.get(conn, run_id)
            ended = run.state.model_copy(update={"ended_at": START + 401})
            store.runs.update(conn, run.model_copy(update={"state": ended}))
    finally:
        store.close()
    run = report_of(url, run_id).runs[0]
    assert run.wall_s == 401 and run.source == url
    data = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(
        json.dumps({**data, "started_at": "2025-01-31T14:00:00+00:00", "ended_at": "2025-01-31T14:06:41+00:00"})
    )
    store = open_store(f"sqlite:///{out.parent / 'elsewhere.db'}")
    try:
        alone = collect([str(out)], store, allow_missing=True).runs[0]
    finally:
        store.close()
    assert alone.wall_s == 401


def test_a_dir_without_run_json_and_an_unknown_run_are_user_errors(stored, tmp_path):
    url, _, _, _ = stored
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"no run\.json"):
        report_of(url, str(tmp_path / "empty"))
    with pytest.raises(UserError, match="no run 'r-nope'"):
        report_of(url, "r-nope")
    with pytest.raises(UserError, match="no such directory"):
        report_of(url, str(tmp_path / "missing"))


def test_sol_fraction_is_read_only_where_it_was_recorded():
    plain = attempt("t").model_copy(update={"measurements": [Measurement(workload="w", speedup=2.0)]})
    assert attempt_sol(plain) is None
    measured = [
        Measurement(workload="a", speedup=2.0, sol_fraction=0.1),
        Measurement(workload="b", speedup=2.0, sol_fraction=0.4),
    ]
    assert attempt_sol(attempt("t").model_copy(update={"measurements": measured})) == pytest.approx(0.2)


def test_several_runs_are_collected_in_the_order_given(stored):
    url, run_id, out, _ = stored
    report = report_of(url, run_id, str(out))
    assert [r.run_id for r in report.runs] == [run_id, run_id] and report.runs[0].created_at == START


def test_a_bench_repeat_is_read_from_its_own_store_with_the_sol_fractions_bench_recorded(stored, tmp_path):
    _, _, out, _ = stored
    for suffix in ("", "-wal", "-shm"):
        if (tmp_path / f"kiln.db{suffix}").exists():
            (tmp_path / f"kiln.db{suffix}").rename(tmp_path / f"out.db{suffix}")
    (tmp_path / "bench.json").write_text(
        json.dumps(
            {
                "repeats": [
                    {
                        "run_id": "r-test",
                        "sol_fraction": {"softmax": 0.3, "row_sum": None},
                        "tasks": {"softmax": {"bound": "memory", "achieved": 12.34, "achieved_unit": "GB/s"}},
                    }
                ]
            }
        )
    )
    report = report_of(f"sqlite:///{tmp_path / 'default.db'}", str(out))
    run = report.runs[0]
    assert run.history and run.tasks[0].points and run.has_sol
    assert [t.sol_fraction for t in run.tasks] == [0.3, None]
    assert [t.reached for t in run.tasks] == ["memory-bound, 12.3 GB/s", ""]
    assert [url.endswith("/out.db") for url in report.rules] == [True]


def test_an_llm_task_that_evaluated_only_its_seed_is_no_candidate_from_the_model_with_the_reason(start_only):
    url, run_id = start_only
    (task,) = report_of(url, run_id).runs[0].tasks
    assert (task.status, task.attempts, task.start_speedup) == ("no candidate from the model", 1, 0.5)
    assert task.reason == (
        "a1 stopped after 3 turns in a row without a candidate; "
        "the last turn: the model answered 3 times in text without a usable python block"
    )
