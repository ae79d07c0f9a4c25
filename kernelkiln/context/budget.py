"""The budget for external knowledge: B_k = max(0, W − S − G − R)."""

from __future__ import annotations


def knowledge_budget(window: int, system: int, generation: int, recent: int) -> int:
    """B_k: tokens left for the warm and cold layers.

    ``window`` W is the model's context window, ``system`` S the system prompt (with the
    tools' schemas), ``generation`` G the tokens reserved for the reply, and ``recent`` R
    what is kept verbatim besides (the builder counts the hot layer here with the
    recent history, since neither is ever cut).
    """
    return max(0, window - system - generation - recent)
