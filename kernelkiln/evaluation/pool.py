"""The evaluation pool's interface, MetaSchedule's runner shape: ``submit(inputs) -> futures``.

- ``LocalPool`` (``--cluster local``, the default, ``local_pool.py``): guard sessions in
  this process, all sharing one DeviceLock, so builds and checks overlap and timing never does.
- ``RayPool`` (``--cluster ray`` / ``ray://HOST:PORT``, ``ray_pool.py``): one evaluation
  actor per device of a Ray cluster; candidates queue for free devices.

A failed candidate is data (a REJECT Verdict); a future raises only when the pool itself
fails (a cluster whose devices all died, a guard that cannot start).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.verdict import Verdict
from kernelkiln.task import Task

if TYPE_CHECKING:
    from kernelkiln import native


@dataclass(frozen=True)
class EvaluationInput:
    """One candidate to judge: the task, the guard's settings, the code, and what it must beat."""

    task: Task
    guard: GuardConfig
    code: str
    incumbent: str | None = None  # the code of the task's best so far: KEEP means faster than it
    timed: bool = True
    time_budget_s: float | None = None  # instead of the guard's own


class EvaluationPool(Protocol):
    """Judges candidates where the run's devices are."""

    @property
    def device_kind(self) -> str | None:
        """The kind of device every result of the run comes from (None: this machine)."""
        ...

    def submit(self, inputs: Sequence[EvaluationInput]) -> list[Future[Verdict]]:
        """One future per input, in order; each completes when a device has judged it."""
        ...

    def native_requests(self, task: Task, guard: GuardConfig, source: str) -> list[native.BuildRequest]:
        """The native builds ``source`` asks for (a diagnostic tool's first step)."""
        ...

    def build_as_sandbox(self, task: Task, guard: GuardConfig, request: native.BuildRequest) -> native.BuildResult:
        """``request`` compiled as candidate builds are (a diagnostic tool's second step)."""
        ...

    def tasks_at_once(self, agents: int) -> int:
        """How many tasks, ``agents`` each, it takes to keep every device busy."""
        ...

    def judgeable(self, task: Task) -> frozenset[str] | None:
        """The knob settings (``knobs.key``) of ``task``'s starting candidate this pool can judge; None: any."""
        ...

    def measured_start(self, task: Task) -> str | None:
        """The starting code this pool's judgements are of, which the run starts ``task`` from (a replay's: the
        lowering may have changed since it was measured); None: the run's own starting code."""
        ...

    def release(self, task: Task) -> None:
        """The run is done with ``task`` (or stopped): sessions kept warm for it close, in-flight work ends."""
        ...

    def close(self) -> None: ...


class PoolJudge:
    """One task's guard, as the diagnostic tools use it, over a pool (``guard.diagnose.Judge``)."""

    def __init__(self, pool: EvaluationPool, task: Task, guard: GuardConfig):
        self.pool, self.task, self.config = pool, task, guard

    def evaluate(
        self, source: str, incumbent: str | None = None, *, timed: bool = True, time_budget_s: float | None = None
    ) -> Verdict:
        item = EvaluationInput(self.task, self.config, source, incumbent, timed, time_budget_s)
        return self.pool.submit([item])[0].result()

    def native_requests(self, source: str) -> list[native.BuildRequest]:
        return self.pool.native_requests(self.task, self.config, source)

    def build_as_sandbox(self, request: native.BuildRequest) -> native.BuildResult:
        return self.pool.build_as_sandbox(self.task, self.config, request)
