import pytest

from kernelkiln.memory.config import ValueConfig
from kernelkiln.memory.stages import StageTracker, attempt_cost
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.testing.memory_fakes import attempt, result


def _observe(tracker, res):
    return tracker.observe(res.attempt, res.adoptions)


def test_worked_example_through_the_stages():
    tracker = StageTracker()
    closed = _observe(tracker, result(attempt(verdict="KEEP", time_ms=1.0), adopted=["k"]))
    assert [(c.stage, c.score, c.adopted) for c in closed] == [("correctness", 1.0, frozenset({"k"}))]
    assert _observe(tracker, result(attempt(verdict="KEEP", time_ms=0.6), adopted=["a", "b"], unadopted=["c"])) == []
    (opt,) = tracker.end("t1")
    assert opt.stage == "optimization"
    assert opt.score == pytest.approx(0.4)
    assert opt.retrieved == {"a", "b", "c"} and opt.adopted == {"a", "b"}


def test_failed_correctness_stage_scores_minus_eta_at_the_turn_budget():
    tracker = StageTracker(ValueConfig().with_turn_budget(3))
    assert _observe(tracker, result(attempt(verdict="REJECT"), unadopted=["x"])) == []
    assert _observe(tracker, result(attempt(verdict="REJECT"), adopted=["x"])) == []
    (closed,) = _observe(tracker, result(attempt(verdict="REJECT")))
    assert (closed.stage, closed.score, closed.adopted, closed.retrieved) == ("correctness", -0.2, {"x"}, {"x"})
    assert _observe(tracker, result(attempt(verdict="KEEP", time_ms=1.0))) == []  # budget spent
    assert tracker.end("t1") == []


def test_turn_budget_is_shared_by_both_stages():
    tracker = StageTracker(ValueConfig().with_turn_budget(2))
    assert [c.stage for c in _observe(tracker, result(attempt(verdict="KEEP", time_ms=2.0)))] == ["correctness"]
    (closed,) = _observe(tracker, result(attempt(verdict="KEEP", time_ms=1.5)))
    assert closed.stage == "optimization" and closed.score == pytest.approx(0.25)


def test_stages_follow_the_runs_budget_not_a_fixed_30_turns():
    value = OptimizeConfig(budget=100, agents=1).memory.value
    assert value.turn_budget == 100 and "turn_budget" not in ValueConfig.model_fields  # one home: the run's budget
    tracker = StageTracker(value)
    _observe(tracker, result(attempt(verdict="KEEP", time_ms=2.0)))  # closes correctness
    closed = [c for i in range(98) for c in _observe(tracker, result(attempt(verdict="KEEP", time_ms=1.0 - i / 200)))]
    assert closed == []  # no stage closed at turn 30 (nor at 99)
    (opt,) = _observe(tracker, result(attempt(verdict="KEEP", time_ms=0.25)))  # turn 100: the budget
    assert opt.stage == "optimization" and opt.score == pytest.approx(0.875)  # credit for the improvement after 30


def test_outside_a_run_stages_close_when_the_task_ends():
    tracker = StageTracker()
    for _ in range(40):
        assert _observe(tracker, result(attempt(verdict="REJECT"))) == []
    assert [c.stage for c in tracker.end("t1")] == ["correctness"]


def test_slower_or_rejected_attempts_do_not_improve():
    tracker = StageTracker()
    _observe(tracker, result(attempt(verdict="KEEP", time_ms=1.0)))
    _observe(tracker, result(attempt(verdict="REVERT", time_ms=1.4)))
    _observe(tracker, result(attempt(verdict="REJECT", time_ms=0.1)))
    (closed,) = tracker.end("t1")
    assert closed.score == -0.2


def test_tasks_and_agents_are_tracked_apart():
    tracker = StageTracker()
    _observe(tracker, result(attempt("t1", agent="x", verdict="REJECT")))
    _observe(tracker, result(attempt("t1", agent="y", verdict="KEEP", time_ms=1.0)))
    assert sorted(tracker.open_pairs()) == [("t1", "x"), ("t1", "y")]
    assert [c.stage for c in tracker.end("t1", "x")] == ["correctness"]
    assert [c.stage for c in tracker.end("t1", "y")] == ["optimization"]


def test_cost_prefers_the_inverse_speedup_measured_side_by_side_over_a_time():
    assert attempt_cost(attempt(time_ms=0.5, speedup=4.0)) == 0.25
    assert attempt_cost(attempt(time_ms=0.5)) == 0.5
    assert attempt_cost(attempt(verdict="REJECT")) is None
