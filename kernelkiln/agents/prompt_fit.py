"""The tier and protocol a turn's prompt is built in: the largest whose prompt leaves the reply its room.

Tiers (``context/tiers.py``) are tried largest first; with tool calls in use, the compact prompt is
tried with its tools and then without them (tool definitions count against the window too), and
the minimal prompt is always text. A prompt's size is the builder's estimate, scaled as the
client scales its own before the server has reported a prompt's tokens (``llm.fit``).
"""

from __future__ import annotations

import math

from kernelkiln.agents.protocol import Mode
from kernelkiln.context import TokenEstimator
from kernelkiln.context.tiers import Tier
from kernelkiln.llm.fit import HEADROOM, UNCALIBRATED


def ladder(mode: Mode) -> tuple[tuple[Tier, Mode], ...]:
    """(tier, protocol) pairs in the order they are tried, starting from the run's protocol ``mode``."""
    if mode == "tools":
        return (("full", "tools"), ("compact", "tools"), ("compact", "text"), ("minimal", "text"))
    return (("full", "text"), ("compact", "text"), ("minimal", "text"))


def scaled(estimate: int, estimator: TokenEstimator) -> int:
    """An ``estimator`` estimate as the server may count it: with headroom once calibrated on its reports,
    denser before (code and chat templates run below the four characters a token assumed)."""
    calibrated = estimator.observations[1] > 0
    return math.ceil(estimate * (HEADROOM if calibrated else UNCALIBRATED))


def refusal(task: str, needed: int, window: int, floor: int) -> str:
    """The one line a turn is refused with when even its minimal prompt leaves the reply under ``floor``."""
    return (
        f"the smallest prompt for {task} (its reference, workloads and working code) needs about {needed} tokens, "
        f"leaving {max(0, window - needed)} of the model's window of {window} for the reply where at least {floor} "
        f"are needed: serve the model with a window of at least {needed + 2 * floor} tokens (--context-window)"
    )
