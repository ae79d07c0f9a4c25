"""What an agent sees on its turn, what it proposes, and the Policy interface.

The orchestrator builds a ``Turn`` for an agent, the agent's policy returns a
``Proposal`` (or None when it has nothing left to try), the guard judges it, and the
policy observes the stored ``Attempt``. Replaying a run's attempts through
``observe`` rebuilds a policy's state, which is how ``--resume`` works.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from kernelkiln.guard.verdict import Verdict
from kernelkiln.memory.prior import Prior
from kernelkiln.memory.retrieval import Retrieved
from kernelkiln.policy.lens import Lens
from kernelkiln.store.records import Attempt, BoardEntry, Case, Experience, Rule
from kernelkiln.task import Task

Objective = Literal["correctness", "optimization", "draft"]


@dataclass(frozen=True)
class Snapshot:
    """An agent's best code so far, as the leaderboard shows it to a drafting agent."""

    agent: str
    lens: str
    attempt_id: str
    speedup: float
    summary: str
    code: str


@dataclass(frozen=True)
class Turn:
    """Everything an agent may use for one proposal (the hot, warm and cold material)."""

    task: Task
    platform: str
    agent: str
    lens: Lens
    objective: Objective
    turn: int  # 1-based evaluations this agent has made on this task, plus one
    code: str  # the agent's working code (its branch)
    parent_id: str | None  # the attempt ``code`` came from (None: the seed)
    best_speedup: float | None  # the task's incumbent speedup over the reference
    feedback: Attempt | None  # the agent's latest evaluated attempt
    verdict: Verdict | None  # its verdict, when evaluated in this process
    history: tuple[Attempt, ...] = ()  # the agent's earlier attempts on this task, oldest first
    experiences: tuple[Retrieved, ...] = ()
    graph: tuple[Attempt, ...] = ()  # graph-ranked attempts of this task (best first)
    board: tuple[BoardEntry, ...] = ()
    rules: tuple[Rule, ...] = ()
    rule_sources: tuple[Experience, ...] = ()  # the experiences the resident rules were distilled from (same ids)
    knowledge: tuple[Retrieved, ...] = ()
    leaderboard: tuple[Snapshot, ...] = ()  # the other agents' best snapshots (drafting only)
    peers: tuple[Attempt, ...] = ()  # the other agents' attempts on this task (when the board is shared)
    evaluated: frozenset[str] = frozenset()  # code_hash of every candidate this run already evaluated on the task
    prior: Prior = field(default_factory=Prior)  # what stored tasks lend this task's knob search (exact, transfer)
    origin: str = ""  # the code the task started from (its seed; "": unknown, the working code stands in)
    judgeable: frozenset[str] | None = None  # the knob settings (keys) the evaluation pool can judge; None: any
    diagnose: Callable[[str, str], str] | None = None  # (tool name, code) -> report; see agents/tools.yaml


@dataclass(frozen=True)
class Choice:
    """Whether a proposal adopted one retrieved experience, and why."""

    experience_id: str
    adopted: bool
    why: str = ""


@dataclass(frozen=True)
class Proposal:
    """A candidate and the decision behind it."""

    code: str
    summary: str  # ≤ SUMMARY_CHARS (store/records.py): the strategy, for the graph and the board
    parent_id: str | None
    choices: tuple[Choice, ...] = ()
    journal: str = ""  # Markdown: strategy, change, reasoning
    case: Case = field(default_factory=Case)  # the policy's part: its move, knob settings, model calls
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


@dataclass(frozen=True)
class GaveUp:
    """A turn that ended without a candidate: why, and what its model calls cost (counted all the same).

    The agent takes another turn; after ``max_turns_without_candidate`` of them in a row (a model
    policy's setting) it stops working on the task. ``reason`` is one line for the user, e.g. "the model
    answered 3 times without calling submit_candidate".
    """

    reason: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    calls: tuple[tuple[int, int], ...] = ()  # (prompt, completion) tokens of each model call


def code_hash(code: str) -> str:
    """Identity of a candidate's source, blind to trailing whitespace."""
    text = "\n".join(line.rstrip() for line in code.strip().splitlines())
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class Policy(Protocol):
    """Proposes candidates for one agent on one task."""

    name: str
    layered: bool  # reads the context's layers (graph, board, knowledge); False: experiences and rules only

    def propose(self, turn: Turn) -> Proposal | GaveUp | None:
        """The next candidate; GaveUp when this turn's model calls gave none; None when nothing is left to try."""

    def observe(self, attempt: Attempt) -> None:
        """Learn from an evaluated attempt of this agent (also used to replay a run)."""
