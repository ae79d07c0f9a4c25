"""How figures read in a report: speedups, dates, durations, verdict counts."""

from __future__ import annotations

import time

from kernelkiln.orchestrator.results import VERDICTS
from kernelkiln.speedup import fmt_x

__all__ = ["fmt_date", "fmt_duration", "fmt_pct", "fmt_tokens", "fmt_verdicts", "fmt_x"]


def fmt_pct(value: float | None) -> str:
    """A fraction as a percentage (``—`` when unknown)."""
    return "—" if value is None else f"{value:.0%}"


def fmt_date(ts: float | None) -> str:
    """A timestamp as ``2025-01-31 14:05 UTC`` (``unknown`` when missing)."""
    return "unknown" if ts is None else time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts))


def fmt_duration(seconds: float | None) -> str:
    """``42 s``, ``3.5 min`` or ``1.2 h``."""
    if seconds is None:
        return "—"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def fmt_verdicts(counts: dict[str, int]) -> str:
    """``3 KEEP · 4 ACCEPT · 5 REVERT · 0 REJECT``."""
    return " · ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)


def fmt_tokens(count: int) -> str:
    """``0``, ``950``, ``12.3K``, ``4.1M``."""
    if count < 1000:
        return str(count)
    return f"{count / 1000:.1f}K" if count < 1_000_000 else f"{count / 1_000_000:.1f}M"
