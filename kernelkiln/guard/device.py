"""One device, many evaluations: builds and checks may overlap, timing never does.

Each agent of a run evaluates in its own GuardSession; they share one DeviceLock per
device. Building and checking hold it shared, so compiles run in parallel; timing
holds it exclusively, so a measured candidate never competes with another
evaluation's compiler or checks for the same cores, caches and memory bandwidth.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class DeviceLock:
    """A readers-writer lock that prefers the writer (timing) once it waits."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Held while building and checking: any number at once, never during timing."""
        with self._cond:
            self._cond.wait_for(lambda: not self._exclusive and not self._waiting)
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Held while timing: nothing else runs on the device."""
        with self._cond:
            self._waiting += 1
            self._cond.wait_for(lambda: not self._exclusive and not self._shared)
            self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()
