"""Long waits for a model, made visible: who is told while a request is in flight, and when.

A request that has not been answered after ``FIRST_NOTICE_S`` (30 s) gets a line with the
time waited, and another each time the wait doubles (60 s, 120 s, …), so an hour's wait is a
handful of lines. While a request is in flight its listener also knows since when (a
terminal's progress display draws a spinner from it). A try abandoned on the client's
timeout is reported with its prompt's estimated size: the server may have read the prompt,
and written a reply, that no usage count will ever confirm (an OpenAI-compatible server
reports usage only in the reply the client stopped waiting for).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

FIRST_NOTICE_S = 30.0


class WaitListener(Protocol):
    """Who hears about a client's long waits (a run tells its progress display and its record)."""

    def say(self, line: str) -> None:
        """One line for the user, about the wait or a retry after a timeout."""

    def waiting(self, since: float | None) -> None:
        """A request is in flight since ``since`` (``time.monotonic()``); None: it has ended."""

    def abandoned(self, prompt_tokens: int) -> None:
        """A try timed out; its prompt was about ``prompt_tokens`` tokens (estimated, never reported)."""


class StderrWaits:
    """The listener of a client on its own: its lines on stderr, nothing else."""

    def say(self, line: str) -> None:
        print(f"kiln: {line}", file=sys.stderr, flush=True)

    def waiting(self, since: float | None) -> None:
        pass

    def abandoned(self, prompt_tokens: int) -> None:
        pass


@contextmanager
def watched(
    listener: WaitListener, describe: Callable[[float], str], first_s: float = FIRST_NOTICE_S
) -> Iterator[None]:
    """Runs the body while ``listener`` hears ``describe(seconds waited)`` at ``first_s``, twice that, and so on."""
    started = time.monotonic()
    done = threading.Event()

    def notices() -> None:
        due = first_s
        while not done.wait(max(0.0, started + due - time.monotonic())):
            listener.say(describe(time.monotonic() - started))
            due *= 2

    listener.waiting(started)
    thread = threading.Thread(target=notices, name="llm-wait-notices", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        listener.waiting(None)
