"""``ast.parse`` made safe to call from several threads at once, on the Pythons where it is not.

CPython before 3.13 keeps the AST constructor's recursion depth in per-interpreter state, so two
threads parsing at once (agents reading knobs, the gate checking a candidate) can fail with
"SystemError: AST constructor recursion depth mismatch" (python/cpython#106905). The run's agent
threads parse all the time, so every ``ast.parse`` of this process takes one lock there.
"""

from __future__ import annotations

import ast
import functools
import sys
import threading
from typing import Any

_lock = threading.Lock()


def install() -> None:
    if sys.version_info >= (3, 13) or getattr(ast.parse, "_kiln_locked", False):
        return
    parse = ast.parse

    @functools.wraps(parse)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _lock:
            return parse(*args, **kwargs)

    locked._kiln_locked = True  # type: ignore[attr-defined]  # a mark on the wrapper, read back above
    ast.parse = locked
