"""The records the store keeps: frozen pydantic models that round-trip through JSON.

Unknown fields are ignored when reading, so a newer writer's records still load.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

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


class Run(Record):
    """One invocation of the optimizer."""

    id: str = Field(default_factory=lambda: new_id("r"))
    created_at: float = Field(default_factory=time.time)
    note: str = ""
    config: dict[str, Any] = Field(default_factory=dict)


class TaskRecord(Record):
    """A task as memory knows it: its id and the tags experiences are matched on."""

    id: str
    op_family: str | None = None
    platform: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    created_at: float = Field(default_factory=time.time)


class Measurement(Record):
    """Times of one workload (milliseconds) and the speedup t_ref/t_cand."""

    workload: str
    t_ref_ms: float | None = None
    t_cand_ms: float | None = None
    speedup: float | None = None
    sol_fraction: float | None = None  # speed-of-light bound / t_cand, when peaks and FLOPs/bytes were known


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
    case: dict[str, Any] = Field(default_factory=dict)
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
