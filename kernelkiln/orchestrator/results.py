"""A run's figures, from its stored attempts: the table, run.json and each task's best.py."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from kernelkiln.atomic import write_atomic
from kernelkiln.store.records import Attempt, Confirmation, NoCandidate, Unconfirmed, Verdict

VERDICTS: tuple[Verdict, ...] = ("KEEP", "ACCEPT", "REVERT", "REJECT")
TaskStatus = Literal["evaluated", "no candidate", "no candidate from the model"]


class TaskResult(BaseModel):
    """One task's figures: its entry in run.json (a field an earlier kernelkiln did not write reads as empty)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: TaskStatus = "evaluated"
    reason: str = ""  # why the policy gave no candidate; "" when evaluated
    best_speedup: float | None = None  # the best candidate's, as the search measured it
    confirmed_speedup: float | None = None  # the best judged again when the task ended (None: not confirmed)
    confirmation: Confirmation | None = None
    # The starting candidate's first evaluation, when correct (seed_speedup: its earlier name in run.json).
    start_speedup: float | None = Field(None, validation_alias=AliasChoices("start_speedup", "seed_speedup"))
    attempts: int = 0
    verdicts: dict[Verdict, int] = Field(default_factory=dict)
    turns_without_candidate: int = 0
    prompt_tokens: int = 0  # every model call's, those of turns that gave no candidate too
    completion_tokens: int = 0
    cost_usd: float = 0.0
    best_summary: str | None = None
    best_attempt: str | None = None
    best: str | None = None  # the path of best.py
    unconfirmed_requests: int = 0  # model requests given up on a timeout
    unconfirmed_prompt_tokens: int = 0  # their prompts' estimated tokens, never in prompt_tokens
    prompt_tiers: dict[str, int] = Field(default_factory=dict)  # a model's candidates by their prompt's tier
    adoptions_owed: int = 0  # retrieved experiences shown with a model's candidates: an adoption record each
    adoptions_not_stated: int = 0  # of them, those the model's records did not account for

    @property
    def not_stated_share(self) -> float | None:
        """The share of owed adoption records the model did not state (None: none were owed)."""
        return self.adoptions_not_stated / self.adoptions_owed if self.adoptions_owed else None

    @property
    def speedup(self) -> float | None:
        """The figure to report: the confirmed one where the best was judged again (None when it then
        failed), else the search's."""
        if self.confirmation is not None:
            return self.confirmed_speedup if self.confirmation.correct else None
        return self.best_speedup

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class RunResult(BaseModel):
    """A run's figures: run.json, and what ``Optimizer.start`` and ``resume`` return."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    status: str
    started_at: str | None = None  # ISO 8601, UTC
    ended_at: str | None = None
    wall_s: float | None = None
    tasks: dict[str, TaskResult]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    unconfirmed_requests: int = 0
    unconfirmed_prompt_tokens: int = 0

    def json_text(self) -> str:
        """run.json's text."""
        return json.dumps(self.model_dump(mode="json"), indent=2) + "\n"


def incumbent(attempts: list[Attempt]) -> Attempt | None:
    """The task's best: its latest KEEP (each KEEP beat the one before)."""
    keeps = [a for a in attempts if a.verdict == "KEEP"]
    return max(keeps, key=lambda a: a.created_at) if keeps else None


def start_attempt(attempts: list[Attempt]) -> Attempt | None:
    """The first evaluation of the task's starting candidate, when it was correct."""
    return next((a for a in attempts if a.case.move == "seed" and a.correct), None)


def confirmation_of(best: Attempt | None, confirmation: Confirmation | None) -> Confirmation | None:
    """``confirmation`` when it is the best's (a record of an earlier best does not count)."""
    if best is None or confirmation is None or confirmation.attempt_id != best.id:
        return None
    return confirmation


def got_candidate(attempts: list[Attempt], model_written: bool) -> bool:
    """Whether the task's policy gave a candidate: any evaluation; a model's, one besides the seed's."""
    return any(a.case.move != "seed" for a in attempts) if model_written else bool(attempts)


def task_status(attempts: list[Attempt], model_written: bool) -> TaskStatus:
    """The task's outcome: evaluated; no candidate (nothing was evaluated); or no candidate from the model
    (a model wrote the candidates and only the seed was evaluated)."""
    if not attempts:
        return "no candidate"
    return "evaluated" if got_candidate(attempts, model_written) else "no candidate from the model"


def task_summary(
    attempts: list[Attempt],
    best_path: Path | None,
    confirmation: Confirmation | None = None,
    no_candidate: NoCandidate | None = None,
    model_written: bool = False,
    unconfirmed: Unconfirmed | None = None,
) -> TaskResult:
    """One task's figures (the run.json entry); ``model_written``: a model wrote the candidates.

    Tokens and cost count every model call, those of turns that gave no candidate too;
    ``status`` is "evaluated" unless the policy gave no candidate (``task_status``), ``reason`` then says why.
    """
    best, start = incumbent(attempts), start_attempt(attempts)
    counts = Counter(a.verdict for a in attempts)
    confirmation = confirmation_of(best, confirmation)
    spent = no_candidate or NoCandidate()
    status = task_status(attempts, model_written)
    unknown = "the task ended before the model gave a candidate" if attempts else "not started"
    timed_out = unconfirmed or Unconfirmed()
    return TaskResult(
        status=status,
        reason="" if status == "evaluated" else spent.why() or unknown,
        best_speedup=best.speedup if best else None,
        confirmed_speedup=confirmation.speedup if confirmation else None,
        confirmation=confirmation,
        start_speedup=start.speedup if start else None,
        attempts=len(attempts),
        verdicts={v: counts.get(v, 0) for v in VERDICTS},
        turns_without_candidate=spent.turns,
        prompt_tokens=sum(a.tokens_in for a in attempts) + spent.prompt_tokens,
        completion_tokens=sum(a.tokens_out for a in attempts) + spent.completion_tokens,
        cost_usd=round(sum(a.case.cost_usd for a in attempts) + spent.cost_usd, 6),
        best_summary=best.summary if best else None,
        best_attempt=best.id if best else None,
        best=str(best_path) if best_path is not None and best is not None else None,
        unconfirmed_requests=timed_out.requests,
        unconfirmed_prompt_tokens=timed_out.prompt_tokens,
        prompt_tiers=dict(Counter(a.case.prompt_tier for a in attempts if a.case.prompt_tier)),
        adoptions_owed=sum(a.case.adoptions_owed for a in attempts),
        adoptions_not_stated=sum(len(a.case.not_stated) for a in attempts),
    )


def safe_name(task_id: str) -> str:
    """A task id as a directory name."""
    return "".join(c if c.isalnum() or c in "-_.=," else "_" for c in task_id)


def write_outputs(
    out_dir: Path,
    run_id: str,
    status: str,
    by_task: dict[str, list[Attempt]],
    confirmed: dict[str, Confirmation | None] | None = None,
    no_candidate: dict[str, NoCandidate] | None = None,
    *,
    model_written: bool = False,
    unconfirmed: dict[str, Unconfirmed] | None = None,
    started_at: float | None = None,
    ended_at: float | None = None,
) -> RunResult:
    """Write ``DIR/<task>/best.py`` for every task with a best and ``DIR/run.json``; returns what it holds.

    ``confirmed``: each task's confirmation record (see ``orchestrator.confirm``), when it has one;
    ``no_candidate``: the turns of each task that gave no candidate; ``model_written``: a model wrote
    the candidates; ``unconfirmed``: each task's model requests given up on a timeout (their prompt
    tokens estimated, beside the tokens the server reported, never in them); ``started_at``/``ended_at``:
    when the run began and last stopped (epoch seconds), for its wall time.
    """
    tasks = {}
    for task_id, attempts in by_task.items():
        best = incumbent(attempts)
        path = out_dir / safe_name(task_id) / "best.py"
        if best is not None:
            write_atomic(path, best.code)
        tasks[task_id] = task_summary(
            attempts,
            path.resolve() if best is not None else None,
            (confirmed or {}).get(task_id),
            (no_candidate or {}).get(task_id),
            model_written,
            (unconfirmed or {}).get(task_id),
        )
    result = RunResult(
        run_id=run_id,
        status=status,
        started_at=_iso(started_at),
        ended_at=_iso(ended_at),
        wall_s=round(ended_at - started_at, 1) if started_at is not None and ended_at is not None else None,
        tasks=tasks,
        prompt_tokens=sum(t.prompt_tokens for t in tasks.values()),
        completion_tokens=sum(t.completion_tokens for t in tasks.values()),
        cost_usd=round(sum(t.cost_usd for t in tasks.values()), 6),
        unconfirmed_requests=sum(t.unconfirmed_requests for t in tasks.values()),
        unconfirmed_prompt_tokens=sum(t.unconfirmed_prompt_tokens for t in tasks.values()),
    )
    write_atomic(out_dir / "run.json", result.json_text())
    return result


def _iso(ts: float | None) -> str | None:
    """Epoch seconds as ISO 8601 UTC (None stays None)."""
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")
