"""An agent's state on one task, and how verdicts move it (docs/architecture.md § The loop, step 8).

- REJECT: nothing moves (a failed candidate does not count toward the plateau);
- KEEP: a new global best, archived as the task's incumbent; the agent continues from it;
- ACCEPT: correct and within the noise band of the best: the agent's branch moves to it;
- REVERT: slower: the agent's working code returns to its best.
ACCEPT and REVERT lengthen the plateau r, KEEP resets it; at r ≥ r_draft the agent drafts.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from kernelkiln.guard.verdict import Verdict
from kernelkiln.policy.lens import Lens
from kernelkiln.policy.turn import GaveUp, Objective, Policy, Snapshot, code_hash
from kernelkiln.store.records import Attempt


@dataclass
class AgentState:
    """One agent's branch on one task."""

    name: str
    lens: Lens
    policy: Policy
    code: str  # working code
    parent_id: str | None = None  # the attempt the working code came from
    best: Attempt | None = None  # this agent's best correct attempt
    plateau: int = 0
    drafting: bool = False
    correct_seen: bool = False
    history: list[Attempt] = field(default_factory=list)
    exhausted: bool = False
    repeats: int = 0  # proposals in a row of code this run already evaluated
    fruitless: int = 0  # turns in a row that gave no candidate (GaveUp)
    verdict: Verdict | None = None  # the guard's full verdict on the latest attempt (this process only)

    def objective(self) -> Objective:
        if not self.correct_seen:
            return "correctness"
        return "draft" if self.drafting else "optimization"


@dataclass
class TaskState:
    """What the agents of one task share: the incumbent, the evaluated set, the budget."""

    task_id: str
    budget: int
    incumbent: Attempt | None = None
    used: int = 0  # evaluations taken (reserved or done)
    evaluated: set[str] = field(default_factory=set)
    gave_up: list[GaveUp] = field(default_factory=list)  # turns whose model calls gave no candidate
    stops: list[str] = field(default_factory=list)  # why agents stopped before the budget was spent
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0  # reservations whose turn has not ended

    def take(self) -> bool | None:
        """Reserve one evaluation of the budget: True; False once the budget is spent.

        None while the budget is full but another agent's turn is still in flight: that turn
        may end without an evaluation and give its reservation back, so ask again after it.
        """
        with self.lock:
            if self.used >= self.budget:
                return None if self.in_flight else False
            self.used += 1
            self.in_flight += 1
            return True

    def give_back(self) -> None:
        """Return a reservation that was not evaluated."""
        with self.lock:
            self.used -= 1
            self.in_flight -= 1

    def evaluated_one(self) -> None:
        """A reservation's turn ended with an evaluation: it keeps its place in the budget."""
        with self.lock:
            self.in_flight -= 1


def settle(attempt: Attempt, task: TaskState, incumbent_when_judged: Attempt | None) -> Attempt:
    """The attempt's final verdict once the task's incumbent is taken into account.

    The first correct, timed candidate becomes the incumbent whatever it measured against
    the reference (there was no best to beat); an untimed one never does. A KEEP judged against an incumbent that was
    replaced meanwhile (parallel agents) must also beat the new one's speedup.
    """
    with task.lock:
        current = task.incumbent
        if attempt.correct and attempt.speedup is None:
            return attempt  # correct but untimed (Triton interpreted without a GPU): nothing to rank it by
        if attempt.correct and current is None:
            attempt = attempt.model_copy(update={"verdict": "KEEP"})
        elif attempt.verdict == "KEEP" and current is not None and current is not incumbent_when_judged:
            if (attempt.speedup or 0.0) <= (current.speedup or 0.0):
                attempt = attempt.model_copy(update={"verdict": "ACCEPT"})
        if attempt.verdict == "KEEP":
            task.incumbent = attempt
        return attempt


def advance(state: AgentState, attempt: Attempt, r_draft: int) -> None:
    """Move the agent's branch and plateau counter after a verdict (also used when resuming)."""
    state.history.append(attempt)
    if attempt.case.objective == "draft":
        state.drafting = False  # the draft was made; a new plateau starts from here
    if attempt.verdict == "REJECT":
        return
    state.correct_seen = True
    if state.best is None or (attempt.speedup or 0.0) > (state.best.speedup or 0.0) or attempt.verdict == "KEEP":
        state.best = attempt
    if attempt.verdict == "KEEP":
        state.plateau = 0
        state.code, state.parent_id = attempt.code, attempt.id
    elif attempt.verdict == "ACCEPT":
        state.plateau += 1
        state.code, state.parent_id = attempt.code, attempt.id
    else:  # REVERT
        state.plateau += 1
        if state.best is not None:
            state.code, state.parent_id = state.best.code, state.best.id
    if state.plateau >= r_draft:
        state.drafting, state.plateau = True, 0


def leaderboard(agents: list[AgentState], me: AgentState) -> tuple[Snapshot, ...]:
    """The other agents' best snapshots, best first (read-only for a drafting agent)."""
    snaps = [
        Snapshot(a.name, a.lens.name, a.best.id, a.best.speedup or 0.0, a.best.summary, a.best.code)
        for a in agents
        if a is not me and a.best is not None
    ]
    return tuple(sorted(snaps, key=lambda s: -s.speedup))


def claim(task: TaskState, code: str) -> bool:
    """Reserve ``code`` for evaluation; False when this run already evaluates or evaluated it."""
    digest = code_hash(code)
    with task.lock:
        if digest in task.evaluated:
            return False
        task.evaluated.add(digest)
        return True
