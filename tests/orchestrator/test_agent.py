"""Verdict actions and the plateau counter (docs/architecture.md § The loop, step 8)."""

from __future__ import annotations

from kernelkiln.agents.tuner import Tuner
from kernelkiln.orchestrator.agent import AgentState, TaskState, advance, leaderboard, settle
from kernelkiln.policy.lens import load_lenses
from kernelkiln.store.records import Attempt


def attempt(verdict: str, speedup: float | None = 1.0, code: str = "c", **case) -> Attempt:
    return Attempt(task_id="t", verdict=verdict, speedup=speedup if verdict != "REJECT" else None, code=code, case=case)


def agent(name: str = "a1") -> AgentState:
    return AgentState(name=name, lens=load_lenses()[0], policy=Tuner(name), code="seed")


def test_the_first_correct_candidate_becomes_the_incumbent_even_when_slower_than_the_reference():
    task = TaskState("t", budget=5)
    first = settle(attempt("REVERT", 0.2), task, None)
    assert first.verdict == "KEEP" and task.incumbent is first


def test_a_reject_never_becomes_the_incumbent():
    task = TaskState("t", budget=5)
    assert settle(attempt("REJECT"), task, None).verdict == "REJECT" and task.incumbent is None


def test_a_keep_judged_against_a_replaced_incumbent_must_beat_the_new_one():
    task = TaskState("t", budget=5)
    old = settle(attempt("KEEP", 1.0), task, None)
    newer = settle(attempt("KEEP", 2.0), task, old)
    late = settle(attempt("KEEP", 1.5), task, old)  # judged against `old` while `newer` landed
    assert late.verdict == "ACCEPT" and task.incumbent is newer


def test_keep_moves_the_branch_and_resets_the_plateau():
    a = agent()
    advance(a, attempt("KEEP", 1.0, code="first"), r_draft=5)
    a.plateau = 3
    advance(a, attempt("KEEP", 2.0, code="better"), r_draft=5)
    assert (a.code, a.plateau, a.best.code) == ("better", 0, "better")


def test_revert_returns_the_working_code_to_the_agents_best_and_accept_keeps_the_branch():
    a = agent()
    advance(a, attempt("KEEP", 2.0, code="best"), r_draft=5)
    advance(a, attempt("ACCEPT", 1.95, code="sideways"), r_draft=5)
    assert a.code == "sideways" and a.best.code == "best"
    advance(a, attempt("REVERT", 1.0, code="slow"), r_draft=5)
    assert a.code == "best" and a.plateau == 2


def test_rejects_do_not_count_toward_the_plateau():
    a = agent()
    advance(a, attempt("KEEP", 1.0), r_draft=2)
    for _ in range(4):
        advance(a, attempt("REJECT"), r_draft=2)
    assert a.plateau == 0 and a.objective() == "optimization"


def test_a_plateau_of_r_draft_makes_the_agent_draft_once():
    a = agent()
    assert a.objective() == "correctness"
    advance(a, attempt("KEEP", 1.0), r_draft=2)
    advance(a, attempt("REVERT", 0.5), r_draft=2)
    advance(a, attempt("ACCEPT", 1.0), r_draft=2)
    assert a.objective() == "draft"
    advance(a, attempt("REVERT", 0.9, objective="draft"), r_draft=2)
    assert a.objective() == "optimization" and a.plateau == 1


def test_the_leaderboard_shows_the_other_agents_best_snapshots_only():
    me, other, idle = agent("a1"), agent("a2"), agent("a3")
    advance(me, attempt("KEEP", 3.0, code="mine"), r_draft=5)
    advance(other, attempt("KEEP", 2.0, code="theirs"), r_draft=5)
    board = leaderboard([me, other, idle], me)
    assert [(s.agent, s.code, s.speedup) for s in board] == [("a2", "theirs", 2.0)]


def test_the_task_budget_is_shared_and_returned_when_unused():
    task = TaskState("t", budget=2)
    assert task.take() is True and task.take() is True
    task.evaluated_one()
    task.give_back()  # the second turn evaluated nothing
    assert task.take()
    task.evaluated_one()
    assert not task.take()


def test_a_correct_but_untimed_candidate_never_becomes_the_incumbent():
    task = TaskState("t", budget=5)
    untimed = settle(attempt("ACCEPT", None), task, None)
    assert untimed.verdict == "ACCEPT" and task.incumbent is None


def test_a_full_budget_says_wait_while_a_turn_in_flight_may_give_its_slot_back():
    task = TaskState("t", budget=1)
    assert task.take() is True
    assert task.take() is None  # the slot is in flight: it may come back
    task.give_back()  # the turn ended without an evaluation
    assert task.take() is True and task.used == 1
    task.evaluated_one()
    assert task.take() is False  # spent, and nothing in flight: no wait
