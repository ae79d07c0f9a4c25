"""Verdict records: what the guard concluded about a candidate, as data."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from kernelkiln.guard.measurement.placement import Placement

Decision = Literal["REJECT", "KEEP", "ACCEPT", "REVERT"]
Stage = Literal["gate", "build", "check", "time", "verdict"]
NOT_MEASURED = "not measured"


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
    dropped: int = 0  # rounds dropped and run again: some batch was kept from running too long
    correction: float = 0.0  # median share of a batch's wall time taken out as scheduling delay
    waited: float = 0.0  # median share of a round's wall time a worker or the guard was kept from running
    sol_fraction: float | None = None  # speed-of-light bound / t_cand (None: no FLOPs/bytes metadata or peaks)
    ref_sol_fraction: float | None = None


class TimingSetup(BaseModel):
    """How an evaluation was timed: where each side ran, and what the request itself cost."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    placement: Placement = Placement()
    accounting: bool = False  # run-queue waits taken out (the kernel's schedstat was readable)
    request_s: float = 0.0  # fixed wall cost of one request, subtracted from every batch
    request_jitter_s: float = 0.0  # its measured jitter; batches last at least 100 times longer
    batch_target_s: float = 0.0
    threads: int = 0  # intra-op threads of every worker (0: not recorded)
    notes: list[str] = []  # why the threads differ from those asked for (clamped, or a contended reference)


class CheckSetup(BaseModel):
    """How an evaluation was checked: against what, and on how many trials (all workloads together)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    oracle: bool = False  # every floating output measured against the float64 oracle (the reference run in double)
    oracle_note: str = ""  # why not, when not: then against the float32 reference with the task's tolerance
    trials: int = 0  # on the task's own inputs
    robustness_trials: int = 0  # on wider inputs, where the reference stayed finite
    robustness_skipped: int = 0  # robustness trials dropped: the reference was not finite on them


class Isolation(BaseModel):
    """Which isolation layers held around a candidate (kernelkiln.isolation), and what it was refused."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    policy: Literal["strict", "best-effort"] = "strict"
    held: dict[str, bool] = {}  # layer -> held around its worker
    build: dict[str, bool] = {}  # layer -> held around its compiler runs (empty: nothing compiled, or all cached)
    notes: dict[str, str] = {}  # layer -> why it did not hold (or, for one that held, what it lacked)
    denied: list[str] = []  # system calls the sandbox refused it, e.g. socket(AF_INET)


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
    isolation: Isolation = Isolation()
    check: CheckSetup | None = None  # None: never checked (a gate or build reject)
    timing: TimingSetup | None = None  # None: not timed
    seconds: float = 0.0
    device: str | None = None  # the cluster device that judged it (None: this process)

    @classmethod
    def reject(cls, stage: Stage, reason: str, **extra: Any) -> Verdict:
        return cls(verdict="REJECT", stage=stage, reason=reason, **extra)

    @classmethod
    def not_measured(cls, reason: str, **extra: Any) -> Verdict:
        """A correct candidate whose timing could not be made clean: ACCEPT, untimed, never a KEEP."""
        return cls(verdict="ACCEPT", stage="time", reason=f"{NOT_MEASURED}: {reason}", correct=True, **extra)

    @property
    def unmeasured(self) -> bool:
        """Correct, but the machine let no clean measurement be made (see ``not_measured``)."""
        return self.verdict == "ACCEPT" and self.stage == "time" and not self.timed
