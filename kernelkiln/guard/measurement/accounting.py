"""The kernel's accounting of a process: CPU time and run-queue wait, read from outside.

A worker cannot change these figures: the kernel keeps them, and the parent reads them
from /proc and from the process's CPU clock. ``Usage`` is one reading; the difference of
two readings taken around a timed batch says how long the worker ran and how long it sat
runnable while something else had its core.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field


def _process_clock(pid: int) -> int:
    # Linux's clock id for a process's CPU clock (MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)):
    # the scheduler's own run time of every thread, exited threads included, current to the ns.
    return ((~pid) << 3) | 2


def cpu_ns(pid: int) -> int | None:
    """CPU time of process ``pid`` (all its threads, living and exited), in ns; None when gone."""
    try:
        return time.clock_gettime_ns(_process_clock(pid))
    except OSError:
        return None


def cpu_seconds(pid: int) -> float | None:
    """CPU time of process ``pid`` in seconds; None when it is gone."""
    ns = cpu_ns(pid)
    return None if ns is None else ns / 1e9


def _wait_ns(path: str) -> int | None:
    """Field 2 of a schedstat file: time spent runnable on a run queue, not running."""
    try:
        with open(path, "rb") as fh:
            return int(fh.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


def thread_waits(pid: int) -> dict[int, int]:
    """Run-queue wait (ns) of every living thread of process ``pid``."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    waits = {}
    for tid in tids:
        ns = _wait_ns(f"/proc/{pid}/task/{tid}/schedstat")
        if ns is not None:
            waits[int(tid)] = ns
    return waits


def own_wait_ns() -> int:
    """Run-queue wait of the calling thread, in ns (0 where the kernel does not say)."""
    return _wait_ns(f"/proc/self/task/{threading.get_native_id()}/schedstat") or 0


def _running(pid: int) -> bool | None:
    """Whether any thread of ``pid`` is running or runnable (None: the process is gone)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state == b"R":
            return True
    return False


def settle(pid: int, timeout_s: float) -> bool:
    """Wait until no thread of ``pid`` runs; False if one still does after ``timeout_s``.

    The kernel brings a thread's run time up to date when it leaves the CPU (or at a
    scheduler tick, milliseconds apart): read while it runs, the figure lags by up to a
    tick. A worker that has answered and gone back to waiting for its next request has
    left the CPU, so its readings are exact.
    """
    deadline = time.perf_counter() + timeout_s
    while True:
        running = _running(pid)
        if not running:
            return True
        if time.perf_counter() > deadline:
            return False


def available() -> bool:
    """Whether this kernel exposes run-queue waits (CONFIG_SCHED_INFO) and process CPU clocks."""
    return cpu_ns(os.getpid()) is not None and _wait_ns(f"/proc/{os.getpid()}/schedstat") is not None


@dataclass(frozen=True)
class Usage:
    """One reading of a worker's accounting: CPU time of the process, run-queue wait per thread."""

    cpu_ns: int
    waits: dict[int, int] = field(default_factory=dict)

    @classmethod
    def read(cls, pid: int) -> Usage:
        return cls(cpu_ns(pid) or 0, thread_waits(pid))

    def since(self, before: Usage) -> tuple[float, float]:
        """CPU seconds of all threads, and the longest run-queue wait of any one, since ``before``."""
        # A thread born in between waited all its wait since; one that exited took its wait along
        # (only ever an under-correction, never an over-correction).
        waited = max((ns - before.waits.get(tid, 0) for tid, ns in self.waits.items()), default=0)
        return (self.cpu_ns - before.cpu_ns) / 1e9, max(0, waited) / 1e9


@dataclass(frozen=True)
class Delta:
    """A worker's accounting over one request, in seconds."""

    cpu_s: float = 0.0  # run time of all its threads
    worker_wait_s: float = 0.0  # longest run-queue wait of any one of its threads
    guard_wait_s: float = 0.0  # run-queue wait of the parent thread that timed the request
    exact: bool = False  # both readings were taken while the worker was off the CPU
