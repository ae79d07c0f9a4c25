"""The device queue: agents' candidates wait for a free device; one evaluation per device at a time.

Backend-agnostic: a device's ``handle`` is a Ray actor in a cluster (``ray_pool.py``) or a
simulated device (``testing/simulated_pool.py``, for ``benchmarks/cluster_scaling.py``).
``submit(work)`` returns at once with a future; the work waits in a thread of its own for
the next free device, so there are never more such threads than candidates in flight. A device that dies mid-evaluation
(``DeviceLost``: its actor or its node is gone) leaves the queue, and the candidate is
evaluated again on another device, once; nothing is stored before a verdict comes back,
so the attempt is neither lost nor stored twice.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kernelkiln.errors import UserError
from kernelkiln.evaluation.threads import in_thread

T = TypeVar("T")
TRIES = 2  # a candidate whose device dies is evaluated once more elsewhere


class DeviceLost(Exception):
    """The device died (its actor or node) before the evaluation returned."""


class DevicesGone(UserError):
    """No device is left to evaluate on, or a candidate lost its device on every try."""


@dataclass
class Device:
    """One evaluation device of the pool, and what it has done."""

    name: str
    kind: str
    handle: Any
    busy_s: float = 0.0
    evaluations: int = 0
    alive: bool = True


@dataclass
class QueueStats:
    """Totals over a queue's life: for progress lines and the scaling benchmark."""

    devices: int
    alive: int
    evaluations: int
    retried: int
    busy_s: float
    waited_s: float  # summed over evaluations: time a candidate waited for a free device
    lost: list[str] = field(default_factory=list)


class DeviceQueue:
    """Free devices, handed to candidates in the order they come."""

    def __init__(self, devices: list[Device], on_lost: Callable[[Device, str], None] | None = None):
        if not devices:
            raise DevicesGone("the cluster offers no evaluation device")
        self.devices = list(devices)
        self._free = list(devices)
        self._cond = threading.Condition()
        self._on_lost = on_lost
        self._retried = 0
        self._waited = 0.0

    def submit(self, work: Callable[[Device], T]) -> Future[T]:
        """``run(work)``, started now; the future completes with its result."""
        return in_thread(lambda: self.run(work), name="kiln-device-queue")

    def run(self, work: Callable[[Device], T]) -> T:
        """``work(device)`` on the first free device; on another once more if that device dies."""
        why = ""
        for _ in range(TRIES):
            device = self._acquire()
            start = time.perf_counter()
            try:
                result = work(device)
            except DeviceLost as lost:
                why = str(lost) or type(lost).__name__
                self._lose(device, why)
                continue
            finally:
                device.busy_s += time.perf_counter() - start
            self._release(device)
            return result
        raise DevicesGone(
            f"a candidate lost its device on each of {TRIES} tries (last: {why}); "
            f"the run stops and resumes with --resume RUN_ID"
        )

    def tasks_at_once(self, agents: int) -> int:
        """As many tasks as it takes for ``agents`` per task to keep every live device busy."""
        return max(1, math.ceil(len(self.alive()) / agents))

    def alive(self) -> list[Device]:
        with self._cond:
            return [d for d in self.devices if d.alive]

    def stats(self) -> QueueStats:
        with self._cond:
            return QueueStats(
                devices=len(self.devices),
                alive=sum(d.alive for d in self.devices),
                evaluations=sum(d.evaluations for d in self.devices),
                retried=self._retried,
                busy_s=sum(d.busy_s for d in self.devices),
                waited_s=self._waited,
                lost=[d.name for d in self.devices if not d.alive],
            )

    def _acquire(self) -> Device:
        start = time.perf_counter()
        with self._cond:
            while not self._free:
                if not any(d.alive for d in self.devices):
                    raise DevicesGone(
                        "every evaluation device of the cluster died; the run stops and resumes with --resume RUN_ID"
                    )
                self._cond.wait()
            self._waited += time.perf_counter() - start
            return self._free.pop(0)

    def _release(self, device: Device) -> None:
        with self._cond:
            device.evaluations += 1
            self._free.append(device)
            self._cond.notify()

    def _lose(self, device: Device, why: str) -> None:
        with self._cond:
            device.alive = False
            self._retried += 1
            self._cond.notify_all()  # waiters re-check whether any device is left
        if self._on_lost is not None:
            self._on_lost(device, why)


def choose_kind(devices: list[Device], wanted: str | None) -> str:
    """The one kind of device a run is judged on: ``wanted``, else the most numerous (ties: by name)."""
    kinds: dict[str, int] = {}
    for device in devices:
        kinds[device.kind] = kinds.get(device.kind, 0) + 1
    if wanted is None:
        return max(sorted(kinds), key=lambda kind: kinds[kind])
    if wanted not in kinds:
        raise UserError(
            f"the run is judged on {wanted!r}, and the cluster has none of it (it has: {', '.join(sorted(kinds))})"
        )
    return wanted
