"""Lines a run says once per process, whichever client or agent comes to say them (a window learned, the tier
prompts are said in, adoption not stated): a run of eight agents says each once, not eight times."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Hashable

_SAID: set[Hashable] = set()
_LOCK = threading.Lock()


def to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def say_once(key: Hashable, line: str, say: Callable[[str], None] = to_stderr) -> None:
    """``say(line)`` unless a line with ``key`` was said before in this process."""
    with _LOCK:
        if key in _SAID:
            return
        _SAID.add(key)
    say(line)
