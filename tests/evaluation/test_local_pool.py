"""The local pool: futures of verdicts, sessions reused per task and guard, closed on release."""

from __future__ import annotations

from kernelkiln.evaluation.local_pool import LocalPool
from kernelkiln.evaluation.pool import EvaluationInput, PoolJudge
from kernelkiln.guard import diagnose
from kernelkiln.task import load_task
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.tasks import TASKS


def _sessions(pool: LocalPool) -> list:
    return [s for group in pool._open.values() for s in group]


def test_submitted_candidates_come_back_as_futures_of_their_verdicts_in_order():
    task = load_task(TASKS / "tiny_softmax.py")
    seed, guard = task.start_for("cpu").read_text(), fast_config()
    pool = LocalPool()
    try:
        futures = pool.submit(
            [EvaluationInput(task, guard, seed, timed=False), EvaluationInput(task, guard, "def broken(", timed=False)]
        )
        good, bad = (f.result(timeout=120) for f in futures)
    finally:
        pool.close()
    assert good.correct
    assert bad.verdict == "REJECT" and bad.stage == "gate"


def test_a_task_keeps_one_warm_session_per_guard_setting_until_it_is_released():
    task = load_task(TASKS / "tiny_softmax.py")
    seed = task.start_for("cpu").read_text()
    pool = LocalPool()
    try:
        for _ in range(2):  # one after the other: the second reuses the first's session
            assert pool.submit([EvaluationInput(task, fast_config(), seed, timed=False)])[0].result(120).correct
        assert len(_sessions(pool)) == 1
        longer = fast_config(time_budget_s=2.0)  # a confirmation's guard: a session of its own
        assert pool.submit([EvaluationInput(task, longer, seed, timed=False)])[0].result(120).correct
        sessions = _sessions(pool)
        assert len(sessions) == 2
        pool.release(task)
        assert _sessions(pool) == [] and all(s._ref is None for s in sessions)
    finally:
        pool.close()


def test_the_diagnostic_tools_run_through_the_pool():
    task = load_task(TASKS / "tiny_softmax.py")
    pool = LocalPool()
    try:
        run = diagnose.diagnoser(PoolJudge(pool, task, fast_config()), profile_budget_s=0.3)
        assert run("run_checks", task.start_for("cpu").read_text()).startswith("PASS")
        assert run("run_checks", "def broken(").startswith("FAIL at gate")
    finally:
        pool.close()
