"""Which cores the timed workers run on, and which the guard itself keeps.

Where the machine has more cores than a worker's threads, the workers get the last
``threads`` cores of the guard's affinity mask and the guard's timing thread the rest,
so the parent's own bookkeeping never competes with the batch it times. Workers apply
their cores to themselves before any thread of theirs starts (threads inherit the
mask); the timing thread is pinned only while it times.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from pydantic import BaseModel, ConfigDict


class Placement(BaseModel):
    """Cores of the timed workers and of the guard's timing thread (None: not pinned)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    worker_cores: list[int] | None = None
    guard_cores: list[int] | None = None


def plan(threads: int) -> Placement:
    """Pin when there is a core to spare for the guard beyond the workers' ``threads``."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) <= threads:
        return Placement()
    return Placement(worker_cores=cores[-threads:], guard_cores=cores[:-threads])


@contextlib.contextmanager
def pinned(cores: list[int] | None) -> Iterator[None]:
    """Run the calling thread on ``cores`` for the duration (nothing when None)."""
    if not cores:
        yield
        return
    saved = os.sched_getaffinity(0)  # of the calling thread: Linux masks are per thread
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, saved)
