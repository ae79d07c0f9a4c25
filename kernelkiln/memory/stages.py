"""Stages of work on a task: correctness until the first correct candidate, then optimization.

Both share one turn budget: the run's (OptimizeConfig.budget, handed down as
``ValueConfig.turn_budget``). A StageTracker follows each (task, agent) pair through its
attempts and reports every stage it closes with its score s: when the agent's attempts
reach the budget (a lone agent spending the task's whole budget), else when the task ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelkiln.memory.config import ValueConfig
from kernelkiln.memory.value import correctness_score, optimization_score
from kernelkiln.store.records import Adoption, Attempt, StageName


@dataclass(frozen=True)
class StageOutcome:
    """A closed stage: its score and the experiences it retrieved and adopted (deduplicated)."""

    task_id: str
    agent: str
    run_id: str | None
    stage: StageName
    score: float
    retrieved: frozenset[str]
    adopted: frozenset[str]


@dataclass
class _Open:
    run_id: str | None
    stage: StageName = "correctness"
    turns: int = 0
    retrieved: set[str] = field(default_factory=set)
    adopted: set[str] = field(default_factory=set)
    t_first_correct: float | None = None
    t_best: float | None = None
    done: bool = False


def attempt_cost(attempt: Attempt) -> float | None:
    """The attempt's cost: 1/speedup over the reference, else its time (ms).

    The speedup comes first: it was measured side by side with the reference, while
    times from different evaluations drift with the machine's load.
    """
    if attempt.speedup:
        return 1.0 / attempt.speedup
    if attempt.time_ms is not None and attempt.time_ms > 0:
        return attempt.time_ms
    return None


class StageTracker:
    """Open stages per (task, agent); closes them as attempts arrive or the task ends."""

    def __init__(self, config: ValueConfig | None = None) -> None:
        self.config = config or ValueConfig()
        self._open: dict[tuple[str, str], _Open] = {}

    def observe(self, attempt: Attempt, adoptions: list[Adoption]) -> list[StageOutcome]:
        """Account for one measured attempt; returns the stages it closed."""
        key = (attempt.task_id, attempt.agent)
        state = self._open.setdefault(key, _Open(run_id=attempt.run_id))
        if state.done:
            return []
        state.turns += 1
        state.retrieved.update(a.experience_id for a in adoptions)
        state.adopted.update(a.experience_id for a in adoptions if a.adopted)
        closed: list[StageOutcome] = []
        cost = attempt_cost(attempt)
        if state.stage == "correctness" and attempt.correct:
            closed.append(self._close(key, state, correctness_score(True, self.config.eta)))
            state.stage = "optimization"
            state.t_first_correct = state.t_best = cost
        elif state.stage == "optimization" and attempt.correct and cost is not None:
            if state.t_best is None or cost < state.t_best:
                state.t_best = cost
        budget = self.config.turn_budget
        if budget is not None and state.turns >= budget:
            closed.append(self._close(key, state, self._final_score(state)))
            state.done = True
        return closed

    def end(self, task_id: str, agent: str = "") -> list[StageOutcome]:
        """Close the open stage of (task, agent), e.g. when the run stops working on it."""
        state = self._open.pop((task_id, agent), None)
        if state is None or state.done:
            return []
        return [self._close((task_id, agent), state, self._final_score(state))]

    def open_pairs(self) -> list[tuple[str, str]]:
        """(task, agent) pairs with a stage still open."""
        return [key for key, state in self._open.items() if not state.done]

    def _final_score(self, state: _Open) -> float:
        if state.stage == "correctness":
            return correctness_score(False, self.config.eta)
        return optimization_score(state.t_first_correct, state.t_best, self.config.eta)

    def _close(self, key: tuple[str, str], state: _Open, score: float) -> StageOutcome:
        outcome = StageOutcome(
            task_id=key[0],
            agent=key[1],
            run_id=state.run_id,
            stage=state.stage,
            score=score,
            retrieved=frozenset(state.retrieved | state.adopted),
            adopted=frozenset(state.adopted),
        )
        state.retrieved, state.adopted = set(), set()
        return outcome
