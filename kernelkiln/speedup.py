"""How a speedup reads wherever one is printed: ``1.23x``."""

from __future__ import annotations


def fmt_x(value: float | None, missing: str = "—") -> str:
    """A speedup as ``1.23x`` (``123x`` from 100 on); ``missing`` when unknown."""
    if value is None:
        return missing
    return f"{value:.2f}x" if value < 100 else f"{value:.0f}x"
