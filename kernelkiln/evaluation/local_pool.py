"""The local pool: guard sessions in this process, one per candidate in flight, sharing one DeviceLock.

A session keeps its task's reference worker warm, so sessions are reused: one is checked
out for each evaluation and back in after, per task and guard settings (a confirmation's
longer timing budget gets a session of its own, as it always did). ``release(task)`` closes
a task's sessions, which also ends an evaluation still running in one (Ctrl-C).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from functools import partial

from kernelkiln import native
from kernelkiln.evaluation.pool import EvaluationInput
from kernelkiln.evaluation.shipment import TaskShipment
from kernelkiln.evaluation.threads import in_thread
from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.measurement.device import DeviceLock
from kernelkiln.guard.session import GuardSession
from kernelkiln.guard.verdict import Verdict
from kernelkiln.task import Task


def task_key(task: Task) -> str:
    """Which task a session judges: its file's text and its size overrides (as an actor keys it)."""
    return TaskShipment.of(task).key


class LocalPool:
    """This process, this machine's device."""

    device_kind = None

    def __init__(self) -> None:
        self.device = DeviceLock()
        self._lock = threading.Lock()
        self._free: dict[tuple[str, str], list[GuardSession]] = {}
        self._open: dict[str, list[GuardSession]] = {}  # by task: every session, free or busy

    def submit(self, inputs: Sequence[EvaluationInput]) -> list[Future[Verdict]]:
        return [in_thread(partial(self._evaluate, item), name="kiln-evaluate") for item in inputs]

    def _evaluate(self, item: EvaluationInput) -> Verdict:
        with self._session(item.task, item.guard) as session:
            return session.evaluate(item.code, item.incumbent, timed=item.timed, time_budget_s=item.time_budget_s)

    def native_requests(self, task: Task, guard: GuardConfig, source: str) -> list[native.BuildRequest]:
        with self._session(task, guard) as session:
            return session.native_requests(source)

    def build_as_sandbox(self, task: Task, guard: GuardConfig, request: native.BuildRequest) -> native.BuildResult:
        with self._session(task, guard) as session:
            return session.build_as_sandbox(request)

    def tasks_at_once(self, agents: int) -> int:
        return 1

    def judgeable(self, task: Task) -> frozenset[str] | None:
        return None

    def measured_start(self, task: Task) -> str | None:
        return None

    @contextmanager
    def _session(self, task: Task, guard: GuardConfig) -> Iterator[GuardSession]:
        owner = task_key(task)
        key = (owner, guard.model_dump_json())
        with self._lock:
            free = self._free.get(key)
            session = free.pop() if free else None
        if session is None:
            session = GuardSession(task, guard, self.device)
            with self._lock:
                self._open.setdefault(owner, []).append(session)
        try:
            yield session
        finally:
            with self._lock:
                if session in self._open.get(owner, ()):  # not released meanwhile
                    self._free.setdefault(key, []).append(session)

    def release(self, task: Task) -> None:
        owner = task_key(task)
        with self._lock:
            sessions = self._open.pop(owner, [])
            for key in [k for k in self._free if k[0] == owner]:
                del self._free[key]
        for session in sessions:
            session.close()

    def close(self) -> None:
        with self._lock:
            sessions = [s for group in self._open.values() for s in group]
            self._open.clear()
            self._free.clear()
        for session in sessions:
            session.close()
