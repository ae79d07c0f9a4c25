"""A call in a daemon thread, as a Future.

Daemon threads rather than an executor's: a run stopped with Ctrl-C exits without waiting
for a model request or an evaluation still in flight (an executor's workers are joined at exit).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


def in_thread(call: Callable[[], T], name: str) -> Future[T]:
    """``call()`` started in a daemon thread named ``name``; its result or exception in the future."""
    future: Future[T] = Future()

    def body() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = call()
        except BaseException as exc:  # a KeyboardInterrupt too: the waiting loop re-raises it
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=body, name=name, daemon=True).start()
    return future
