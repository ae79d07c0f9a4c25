"""Token estimates for budgeting rules before any provider has reported usage."""

from __future__ import annotations

from collections.abc import Callable

TokenCounter = Callable[[str], int]

CHARS_PER_TOKEN = 4.0


def estimate_tokens(text: str) -> int:
    """About one token per four characters (at least 1); context/ calibrates a better one."""
    return max(1, round(len(text) / CHARS_PER_TOKEN))
