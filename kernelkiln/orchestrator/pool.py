"""The evaluation pool: where an agent's candidates are judged.

- ``LocalPool`` (``--cluster local``, the default): a GuardSession per agent in this
  process, all sharing one DeviceLock, so builds and checks overlap and timing never does.
- ``RayPool`` (``--cluster ray`` / ``ray://HOST:PORT``, in ``ray_pool.py``): one evaluation
  actor per device of a Ray cluster; candidates queue for free devices.

Either way an agent holds an ``Evaluator``: ``evaluate(code, incumbent)`` returns the
guard's Verdict, and the run's loop does not know where it was judged.
"""

from __future__ import annotations

from typing import Protocol

from kernelkiln.errors import UserError
from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.measurement.device import DeviceLock
from kernelkiln.guard.session import GuardSession
from kernelkiln.guard.verdict import Verdict
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.task import Task


class Evaluator(Protocol):
    """An agent's handle on the guard for one task."""

    task: Task
    config: GuardConfig

    def evaluate(
        self, source: str, incumbent: str | None = None, *, timed: bool = True, time_budget_s: float | None = None
    ) -> Verdict: ...

    def close(self) -> None: ...


class EvaluationPool(Protocol):
    """Opens evaluators; knows how many tasks its devices can keep busy at once."""

    device_kind: str | None  # the kind of device every result of the run comes from (None: this machine)

    def evaluator(self, task: Task, guard: GuardConfig) -> Evaluator: ...

    def tasks_at_once(self, agents: int) -> int: ...

    def close(self) -> None: ...


class LocalPool:
    """This process, this machine's device."""

    device_kind = None

    def __init__(self) -> None:
        self.device = DeviceLock()

    def evaluator(self, task: Task, guard: GuardConfig) -> GuardSession:
        return GuardSession(task, guard, self.device)

    def tasks_at_once(self, agents: int) -> int:
        return 1

    def close(self) -> None:
        pass


def open_pool(config: OptimizeConfig, store_url: str, device_kind: str | None = None, progress=None) -> EvaluationPool:
    """The pool ``config.cluster`` names; ``device_kind``: the kind a resumed run was judged on."""
    if config.cluster.address == "local":
        return LocalPool()
    try:
        import ray  # noqa: F401
    except ImportError:
        raise UserError("--cluster ray needs Ray: pip install 'kernelkiln[ray]'") from None
    from kernelkiln.orchestrator.ray_pool import RayPool

    return RayPool(config, store_url, device_kind, progress)
