"""Speed-of-light (SOL) figures: the fastest a workload could run on a device's peaks.

A workload that performs ``flops`` floating-point operations and moves ``bytes`` bytes
cannot finish faster than ``max(flops / peak FLOP/s, bytes / bandwidth)`` (the roofline
bound). ``sol_fraction`` compares that bound with a measured time: 1.0 is the roofline,
0.25 means four times slower than it; above 1.0 the measurement (or the metadata, or the
peaks) is suspect.
"""

from __future__ import annotations

import math
from typing import TypeGuard

from kernelkiln.platforms.base import Peaks

__all__ = ["sol_bound_s", "sol_fraction"]


def sol_bound_s(flops: float | None, bytes: float | None, peaks: Peaks) -> float | None:
    """Seconds the roofline allows: the larger of the compute and the memory time.

    A term counts only when both its amount and its peak are known and positive; with
    one term known that term is the bound; with neither, None.
    """
    terms = []
    if _known(flops) and _known(peaks.gflops_fp32):
        terms.append(flops / (peaks.gflops_fp32 * 1e9))
    if _known(bytes) and _known(peaks.bandwidth_gbs):
        terms.append(bytes / (peaks.bandwidth_gbs * 1e9))
    return max(terms) if terms else None


def sol_fraction(bound_s: float | None, measured_s: float | None) -> float | None:
    """``bound_s / measured_s``: the fraction of speed-of-light reached; None when either is unknown."""
    if not _known(bound_s) or not _known(measured_s):
        return None
    return bound_s / measured_s


def _known(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value) and value > 0
