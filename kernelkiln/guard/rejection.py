"""A rejection raised inside the guard's cascade, and a worker's reported error as one line."""

from __future__ import annotations

from typing import Any

from kernelkiln.guard.verdict import Stage


def raised(reply: dict[str, Any]) -> str:
    """The error a worker reported, with its candidate.py line when known."""
    where = f" at candidate.py {reply['where']}" if reply.get("where") else ""
    return f"{reply.get('error')}{where}"


class Reject(Exception):
    """The candidate fails at ``stage``; the cascade turns it into a REJECT verdict."""

    def __init__(self, stage: Stage, reason: str, diagnostics: list[dict[str, Any]] | None = None):
        super().__init__(reason)
        self.stage, self.reason, self.diagnostics = stage, reason, diagnostics or []
