"""Ctrl-C held back while a verdict or a task's end is written, so the store never holds half a step.

A store write is one transaction and rolls back if interrupted, but the loop's own state
(the incumbent, the agent's branch) would already have moved: deferring the interrupt to
the end of the write keeps the two in step. Only the main thread receives signals; in
any other thread this does nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """A SIGINT during the block is delivered when the block ends (to the handler it would have reached)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[tuple[int, FrameType | None]] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append((signum, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received and callable(previous):
            previous(*received[0])
