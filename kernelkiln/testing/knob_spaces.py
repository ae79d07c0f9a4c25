"""Synthetic knob spaces for the tuner: 4 knobs x 6 values, deterministic speedups (no guard)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from kernelkiln.task import knobs as K

NAMES = ("A", "B", "C", "D")
SPACE = "".join(f"{n} = 0\n" for n in NAMES) + f"KNOBS = { {n: list(range(6)) for n in NAMES}!r}\n"
Speedup = Callable[[K.Settings], float]


def interacting(seed: int) -> Speedup:
    """A factor for each knob's value and one for each value pair of (A, B) and of (C, D), drawn from ``seed``."""
    r = random.Random(seed)
    single = {n: [r.uniform(-1.0, 0.6) for _ in range(6)] for n in NAMES}
    pair = {(a, b): r.uniform(-0.5, 0.5) for a in range(6) for b in range(6)}
    return lambda s: math.exp(sum(single[n][s[n]] for n in NAMES) + pair[s["A"], s["B"]] + 0.5 * pair[s["C"], s["D"]])
