"""Verdict records: what the guard concluded about a candidate, as data."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Decision = Literal["REJECT", "KEEP", "ACCEPT", "REVERT"]
Stage = Literal["gate", "build", "check", "time", "verdict"]


class WorkloadResult(BaseModel):
    """Timing of one workload: medians of interleaved rounds, in seconds."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    sizes: dict[str, Any]
    t_ref_s: float
    t_cand_s: float
    t_inc_s: float | None = None
    speedup: float
    speedup_vs_incumbent: float | None = None
    spread: float  # relative standard error of the per-round log-speedup
    rounds: int
    reps: int
    sol_fraction: float | None = None  # speed-of-light bound / t_cand (None: no FLOPs/bytes metadata or peaks)
    ref_sol_fraction: float | None = None


class Verdict(BaseModel):
    """The guard's conclusion; failures are verdicts too, never exceptions."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    verdict: Decision
    stage: Stage
    reason: str
    correct: bool = False
    speedup: float | None = None
    speedup_vs_incumbent: float | None = None
    noise_margin: float | None = None
    timed: bool = False
    diagnostics: list[dict[str, Any]] = []
    workloads: list[WorkloadResult] = []
    isolation: dict[str, bool] = {}
    seconds: float = 0.0

    @classmethod
    def reject(cls, stage: Stage, reason: str, **extra: Any) -> Verdict:
        return cls(verdict="REJECT", stage=stage, reason=reason, **extra)


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))
