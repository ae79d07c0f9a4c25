"""Speed-of-light (SOL) figures: the fastest a workload could run on a device's peaks.

A workload that performs ``flops`` floating-point operations and moves ``bytes`` bytes
cannot finish faster than ``max(flops / peak FLOP/s, bytes / bandwidth)`` (the roofline
bound). ``sol_fraction`` compares that bound with a measured time: 1.0 is the roofline,
0.25 means four times slower than it; above 1.0 the measurement (or the metadata, or the
peaks) is suspect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, TypeGuard

from kernelkiln.platforms.base import Peaks
from kernelkiln.stats import geomean

__all__ = ["Achieved", "achieved", "over_workloads", "sol_bound_s", "sol_fraction"]


@dataclass(frozen=True)
class Achieved:
    """What a measured time reached against the roofline term that bounds it.

    ``bound`` is the larger term ("memory": bytes over bandwidth, "compute": FLOPs over the
    FMA peak); ``rate`` is that term's quantity over the time (GB/s or GFLOP/s) and ``peak``
    the machine's, so ``rate / peak`` is the speed-of-light fraction.
    """

    bound: Literal["memory", "compute"]
    rate: float
    peak: float

    @property
    def unit(self) -> str:
        return "GB/s" if self.bound == "memory" else "GFLOP/s"

    @property
    def fraction(self) -> float:
        return self.rate / self.peak


def achieved(flops: float | None, bytes: float | None, seconds: float | None, peaks: Peaks) -> Achieved | None:
    """The rate ``seconds`` reached on the bounding term; None when no term or no time is known."""
    if not _known(seconds):
        return None
    terms = [Achieved(bound, amount / seconds / 1e9, peak) for bound, amount, peak in _terms(flops, bytes, peaks)]
    # the bounding term takes the longest alone, so it is the one whose fraction of its peak is largest
    return max(terms, key=lambda a: a.fraction) if terms else None


def over_workloads(reached: list[Achieved | None]) -> Achieved | None:
    """One figure for several workloads: their geometric-mean rate, when each has one and all share a bound."""
    found = [a for a in reached if a is not None]
    if not found or len(found) < len(reached) or len({a.bound for a in found}) > 1:
        return None
    rate = geomean([a.rate for a in found])
    return Achieved(found[0].bound, rate, found[0].peak) if rate else None


def sol_bound_s(flops: float | None, bytes: float | None, peaks: Peaks) -> float | None:
    """Seconds the roofline allows: the larger of the compute and the memory time.

    A term counts only when both its amount and its peak are known and positive; with
    one term known that term is the bound; with neither, None.
    """
    times = [amount / (peak * 1e9) for _, amount, peak in _terms(flops, bytes, peaks)]
    return max(times) if times else None


def sol_fraction(bound_s: float | None, measured_s: float | None) -> float | None:
    """``bound_s / measured_s``: the fraction of speed-of-light reached; None when either is unknown."""
    if not _known(bound_s) or not _known(measured_s):
        return None
    return bound_s / measured_s


def _terms(
    flops: float | None, bytes: float | None, peaks: Peaks
) -> list[tuple[Literal["memory", "compute"], float, float]]:
    """The roofline's terms whose amount and peak are both known: (bound, amount, peak in G/s)."""
    terms: list[tuple[Literal["memory", "compute"], float, float]] = []
    if _known(bytes) and _known(peaks.bandwidth_gbs):
        terms.append(("memory", bytes, peaks.bandwidth_gbs))
    if _known(flops) and _known(peaks.gflops_fp32):
        terms.append(("compute", flops, peaks.gflops_fp32))
    return terms


def _known(value: float | None) -> TypeGuard[float]:
    return value is not None and math.isfinite(value) and value > 0
