"""What a report shows: plain frozen dataclasses, one run, its tasks and the rules beside them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Point:
    """One judged attempt of a task, in the order the guard judged them (``index`` from 1)."""

    index: int
    id: str
    agent: str
    lens: str | None
    verdict: str
    speedup: float | None
    objective: str
    parent_id: str | None
    summary: str
    sol_fraction: float | None = None
    vs_best: float | None = None  # the guard's speedup over the incumbent of the moment, which decided the verdict

    @property
    def drafting(self) -> bool:
        """Whether the agent was drafting (changing strategy after a plateau) when it proposed this."""
        return self.objective == "draft"


@dataclass(frozen=True)
class TaskReport:
    """One task of a run: run.json's figures and, when the store has them, its attempts."""

    task_id: str
    best_speedup: float | None  # confirmed (judged again when the task ended) when it was, else the search's
    start_speedup: float | None
    attempts: int
    verdicts: dict[str, int]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    best_summary: str | None = None
    best_attempt: str | None = None
    sol_fraction: float | None = None
    reached: str = ""  # the bound and the rate reached on it (``memory-bound, 12.3 GB/s``), from bench.json
    points: tuple[Point, ...] = ()
    best_path: tuple[str, ...] = ()
    search_speedup: float | None = None  # the best as the search measured it
    confirmed: bool = False
    confirm_failure: str = ""  # why the best failed when judged again
    status: str = "evaluated"  # or "no candidate", "no candidate from the model" (see orchestrator.results)
    reason: str = ""  # why the policy gave no candidate
    adoptions_owed: int = 0  # retrieved experiences shown with a model's candidates (run.json)
    adoptions_not_stated: int = 0  # of them, those the model's adoption records did not account for
    prompt_tiers: dict[str, int] = field(default_factory=dict)  # a model's candidates by their prompt's tier

    @property
    def adoption_note(self) -> str:
        """The adoption records a model did not state, as one clause ("" when it stated all or none were owed)."""
        if not self.adoptions_not_stated:
            return ""
        share = self.adoptions_not_stated / self.adoptions_owed
        owed = self.adoptions_owed
        return f"adoption not stated for {self.adoptions_not_stated} of {owed} experiences shown ({share:.0%})"

    @property
    def tier_note(self) -> str:
        """The prompt tiers other than full the model's candidates were asked in ("" when all were full)."""
        if set(self.prompt_tiers) <= {"full"}:
            return ""
        return "prompts " + ", ".join(f"{tier} {n}" for tier, n in sorted(self.prompt_tiers.items()))

    @property
    def best_over_start(self) -> float | None:
        """How many times faster the best is than the starting candidate."""
        if self.best_speedup is None or not self.start_speedup:
            return None
        return self.best_speedup / self.start_speedup

    @property
    def tokens(self) -> int:
        """Prompt and completion tokens together."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def agents(self) -> tuple[str, ...]:
        """The agents that made attempts, by name (so a1 keeps its colour across tasks)."""
        return tuple(sorted({p.agent for p in self.points}))


@dataclass(frozen=True)
class RunReport:
    """One run: its header, its tasks and how memory grew while it ran."""

    run_id: str
    status: str
    tasks: tuple[TaskReport, ...]
    created_at: float | None = None
    finished_at: float | None = None  # when the run last stopped (runs stored before it was kept: its last attempt)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    out: str | None = None
    history: bool = True
    note: str = ""
    growth: tuple[tuple[float, int], ...] = ()
    experiences_before: int = 0
    budget: int | None = None  # evaluations per task the run allowed (unknown from run.json alone)
    source: str = ""  # the store it was read from ("": its run.json alone)

    @property
    def wall_s(self) -> float | None:
        """Seconds from the run's start to when it last stopped (None when either is unknown)."""
        return self.finished_at - self.created_at if self.finished_at and self.created_at else None

    def short(self, task: TaskReport) -> bool:
        """Whether ``task`` ended with fewer evaluations than the budget (its policy ran out of candidates)."""
        return self.budget is not None and 0 < task.attempts < self.budget and self.status == "done"

    @property
    def confirmed(self) -> bool:
        """Whether any task's best was judged again when its task ended."""
        return any(t.confirmed or t.confirm_failure for t in self.tasks)

    @property
    def has_sol(self) -> bool:
        """Whether any task carries a speed-of-light fraction."""
        return any(t.sol_fraction is not None for t in self.tasks)


@dataclass(frozen=True)
class RuleRow:
    """A resident rule with its value Q, frequency f, tokens ℓ and priority π = Q·f/ℓ."""

    id: str
    text: str
    q: float
    frequency: float
    tokens: int
    priority: float


@dataclass(frozen=True)
class Report:
    """Everything one page shows."""

    runs: tuple[RunReport, ...]
    rules: dict[str, tuple[RuleRow, ...]]  # store URL → its resident rules (empty without a store)
    store_url: str | None
    generated_at: float = field(default_factory=time.time)
