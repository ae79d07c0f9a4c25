"""The records the store keeps: frozen pydantic models that round-trip through JSON.

Unknown fields are ignored when reading, so a newer writer's records still load.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Verdict = Literal["REJECT", "KEEP", "ACCEPT", "REVERT"]
StageName = Literal["correctness", "optimization"]
BoardKind = Literal["win", "trap"]
ExperienceKind = Literal["experience", "knowledge"]

SUMMARY_CHARS = 160


def new_id(prefix: str) -> str:
    """A fresh, globally unique record id such as ``a-3f9c…``."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Record(BaseModel):
    """Base of all records: immutable, JSON round-trip, unknown fields ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")


RunStatus = Literal["running", "done", "stopped", "interrupted", "failed", "unknown"]


class RunTask(Record):
    """A task of a run: its file, its size overrides and its id in memory."""

    path: str
    overrides: dict[str, Any] = Field(default_factory=dict)
    id: str


class Confirmation(Record):
    """A task's best judged again when the task ended, timing for longer: the figure a run reports."""

    attempt_id: str
    verdict: Verdict
    correct: bool
    speedup: float | None = None
    reason: str = ""
    time_budget_s: float
    workloads: dict[str, float | None] = Field(default_factory=dict)


class NoCandidate(Record):
    """A task's model calls that gave no candidate: what they cost, why each turn gave up, why agents stopped."""

    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    reasons: list[str] = Field(default_factory=list)  # each distinct one once, the latest last
    stops: list[str] = Field(default_factory=list)  # why agents (or the task) stopped before a candidate

    def plus(self, other: NoCandidate) -> NoCandidate:
        """Both counts together (a resumed task's earlier and later turns)."""
        return NoCandidate(
            turns=self.turns + other.turns,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            reasons=latest_last(self.reasons + other.reasons),
            stops=list(dict.fromkeys(self.stops + other.stops)),
        )

    def why(self) -> str:
        """One line: why the agents stopped, and the latest turn's reason ("" when none is known)."""
        if not self.reasons:
            return "; ".join(self.stops)
        if not self.stops:
            return self.reasons[-1]
        return f"{'; '.join(self.stops)}; the last turn: {self.reasons[-1]}"


def latest_last(items: list[str]) -> list[str]:
    """Each distinct item once, where it last occurred."""
    return list(reversed(dict.fromkeys(reversed(items))))


class Unconfirmed(Record):
    """A task's model requests given up on at the client's timeout: no server reports what they cost.

    The server may have read each prompt and written a reply nobody waited for; ``prompt_tokens``
    is the prompts' size estimated from their characters, and the replies' tokens are unknown.
    """

    requests: int = 0
    prompt_tokens: int = 0

    def plus(self, prompt_tokens: int) -> Unconfirmed:
        """This count with one more request given up."""
        return Unconfirmed(requests=self.requests + 1, prompt_tokens=self.prompt_tokens + prompt_tokens)


class RunState(Record):
    """Where a run stands (changes as it goes); the configuration it runs under is ``Run.config``."""

    status: RunStatus = "unknown"
    out: str | None = None  # where best.py files and run.json go
    tasks: list[RunTask] = Field(default_factory=list)
    finished: list[str] = Field(default_factory=list)  # ids of the tasks done
    confirmed: dict[str, Confirmation | None] = Field(default_factory=dict)  # by task id
    no_candidate: dict[str, NoCandidate] = Field(default_factory=dict)  # by task id, when a turn gave none
    unconfirmed: dict[str, Unconfirmed] = Field(default_factory=dict)  # by task id, when a request timed out
    device: str | None = None  # on a cluster: the device kind every verdict came from (a resume keeps it)
    ended_at: float | None = None  # when the run last stopped (done, stopped, interrupted or failed)


class Run(Record):
    """One invocation of the optimizer."""

    id: str = Field(default_factory=lambda: new_id("r"))
    created_at: float = Field(default_factory=time.time)
    note: str = ""
    config: dict[str, Any] = Field(default_factory=dict)  # the OptimizeConfig, as JSON (validated by its reader)
    state: RunState = Field(default_factory=RunState)

    @model_validator(mode="before")
    @classmethod
    def _split_legacy_layout(cls, data: Any) -> Any:
        # Before schema version 3, a run's state lived in its config, beside the options under "options".
        if isinstance(data, dict) and not data.get("state") and "tasks" in (data.get("config") or {}):
            config = data["config"]
            state = {k: config[k] for k in _STATE_KEYS if k in config}
            data = {**data, "config": config.get("options", {}), "state": state}
        return data


_STATE_KEYS = tuple(RunState.model_fields)


class TaskRecord(Record):
    """A task as memory knows it: its id and the tags experiences are matched on."""

    id: str
    op_family: str | None = None
    platform: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    created_at: float = Field(default_factory=time.time)


class Signature(Record):
    """A task as memory matches it for exact reuse and transfer (see memory/signature.py)."""

    exact: str  # digest of everything that decides a candidate's figures
    task_id: str
    platform: str
    machine: str
    family: str | None = None
    knobs: list[str] = Field(default_factory=list)  # the seed's knob names
    elements: float = 0.0  # log2 of the inputs' elements, mean over workloads
    inner: float = 0.0  # log2 of the first input's last dimension, mean over workloads
    created_at: float = Field(default_factory=time.time)


class Measurement(Record):
    """Times of one workload (milliseconds) and the speedup t_ref/t_cand."""

    workload: str
    t_ref_ms: float | None = None
    t_cand_ms: float | None = None
    speedup: float | None = None
    sol_fraction: float | None = None  # speed-of-light bound / t_cand, when peaks and FLOPs/bytes were known


class Case(Record):
    """What an attempt was and how it was judged, beyond its verdict (one JSON column).

    The policy fills its part (``move``, ``knobs``, ``changed``, ``calls``); the
    orchestrator adds what the guard found and what the attempt cost.
    """

    move: str = ""  # how the policy made it: seed, rule, experience, draft, sampled, neighbour, random, llm
    knobs: dict[str, Any] | None = None  # a tuner candidate's knob settings (None: not a knob candidate)
    changed: dict[str, Any] = Field(default_factory=dict)  # the settings changed from its parent
    calls: list[tuple[int, int]] = Field(default_factory=list)  # (prompt, completion) tokens of each model call
    objective: str = ""  # correctness, optimization or draft
    code_hash: str = ""  # identity of the source (see policy.turn.code_hash)
    stage: str = ""  # the guard stage the verdict was reached at
    reason: str = ""
    noise_margin: float | None = None
    speedup_vs_incumbent: float | None = None
    diagnostics: list[dict[str, Any]] = Field(default_factory=list)
    cost_usd: float = 0.0
    device: str | None = None  # the cluster device that judged it (None: the run's own machine)
    signature: str = ""  # the exact key of the task's signature it was judged under ("" before schema 4)
    prompt_tier: str = ""  # a model's: the tier its prompt was said in (context/tiers.py; "" before tiers)
    adoptions_owed: int = 0  # a model's: the retrieved experiences its prompt showed (an adoption record each)
    not_stated: list[str] = Field(default_factory=list)  # of them, those its record did not account for


class Attempt(Record):
    """One evaluated candidate: a node of the experience graph."""

    id: str = Field(default_factory=lambda: new_id("a"))
    task_id: str
    run_id: str | None = None
    parent_id: str | None = None
    agent: str = ""
    lens: str | None = None
    summary: str = ""
    journal: str = ""
    case: Case = Field(default_factory=Case)
    code: str = ""
    verdict: Verdict
    error_class: str | None = None
    time_ms: float | None = None
    speedup: float | None = None
    measurements: list[Measurement] = Field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    created_at: float = Field(default_factory=time.time)

    @field_validator("summary")
    @classmethod
    def _cap_summary(cls, value: str) -> str:
        return _clip(value, SUMMARY_CHARS)

    @property
    def correct(self) -> bool:
        """Whether the guard found the candidate correct (any verdict but REJECT)."""
        return self.verdict != "REJECT"


class Experience(Record):
    """A distilled, reusable lesson (or a section of a knowledge document) with value Q."""

    id: str = Field(default_factory=lambda: new_id("e"))
    kind: ExperienceKind = "experience"
    text: str
    summary: str = ""
    platform: str | None = None
    op_family: str | None = None
    stage: StageName | None = None
    conditions: list[str] = Field(default_factory=list)
    source_attempt_id: str | None = None
    q: float = 0.0
    retrievals: int = 0
    adoptions: int = 0
    distinct_tasks: int = 0
    resident: bool = False
    born_stage: int = 0
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)

    @field_validator("summary")
    @classmethod
    def _cap_summary(cls, value: str) -> str:
        return _clip(value, SUMMARY_CHARS)

    @property
    def tags_text(self) -> str:
        """The tags as searchable words."""
        parts = [self.platform, self.op_family, self.stage, *self.conditions]
        return " ".join(p for p in parts if p)


class Adoption(Record):
    """Whether an attempt adopted a retrieved experience, and why (recorded before evaluation)."""

    attempt_id: str
    experience_id: str
    task_id: str
    adopted: bool
    why: str = ""
    created_at: float = Field(default_factory=time.time)


class StageRecord(Record):
    """A closed stage of work on a task and its score s."""

    id: int | None = None
    run_id: str | None = None
    task_id: str
    agent: str = ""
    stage: StageName
    score: float
    retrieved: int = 0
    adopted: int = 0
    closed_at: float = Field(default_factory=time.time)


class Rule(Record):
    """A resident rule distilled from an experience (same id, same Q)."""

    id: str
    text: str
    tokens: int
    frequency: float = 0.0
    resident: bool = False
    created_at: float = Field(default_factory=time.time)
    updated_at: float = Field(default_factory=time.time)


class BoardEntry(Record):
    """A conclusion on the shared board: a win or a trap."""

    id: int | None = None
    task_id: str
    agent: str = ""
    kind: BoardKind
    summary: str
    reflection: str = ""
    speedup: float | None = None
    attempt_id: str | None = None
    created_at: float = Field(default_factory=time.time)
