"""Geometric means with 95% confidence intervals over repeated trajectories.

Speedups and token counts are ratios, so intervals are taken on their logarithms:
mean ± t(0.975, K−1)·s/√K of log x, back through exp. A paired ratio compares two arms
repeat by repeat (repeat k of both arms shares its random seed), which removes what
the repeats have in common from the interval. One repeat has no interval.
"""

from __future__ import annotations

import collections
import math
import statistics
from dataclasses import dataclass

# Student's t, two-sided 95%, for 1..30 degrees of freedom; beyond 30 the normal 1.96.
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t975(df: int) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError("a t quantile needs at least one degree of freedom")
    return _T975[df - 1] if df <= len(_T975) else 1.96


@dataclass(frozen=True)
class Interval:
    """A geometric mean over K values and its 95% confidence interval (None for K = 1)."""

    mean: float
    low: float | None
    high: float | None
    k: int

    def as_dict(self) -> dict:
        return {"mean": self.mean, "ci95": None if self.low is None else [self.low, self.high], "k": self.k}


def geometric_interval(values: list[float]) -> Interval | None:
    """The geometric mean of positive ``values`` with its t interval; None without values."""
    logs = [math.log(v) for v in values if v is not None and v > 0]
    if not logs:
        return None
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return Interval(math.exp(mean), None, None, 1)
    half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return Interval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs))


def paired_ratio(arm: dict[int, float], baseline: dict[int, float]) -> Interval | None:
    """arm/baseline over the repeats both have (keyed by repeat), as a geometric mean with its interval."""
    shared = sorted(k for k in arm if k in baseline and arm[k] and baseline[k])
    return geometric_interval([arm[k] / baseline[k] for k in shared])


def mean_interval(values: list[float | None]) -> Interval | None:
    """The arithmetic mean of ``values`` (counts, not ratios) with its t interval; None without values."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    mean = statistics.fmean(present)
    if len(present) < 2:
        return Interval(mean, None, None, 1)
    half = t975(len(present) - 1) * statistics.stdev(present) / math.sqrt(len(present))
    return Interval(mean, mean - half, mean + half, len(present))


def _ranks(values: list[float]) -> list[float]:
    """0-based ranks, ties taking their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2
        i = j + 1
    return out


def wilcoxon(differences: list[float]) -> float | None:
    """The two-sided p-value of Wilcoxon's signed-rank test that paired ``differences`` centre on 0 (zeros
    dropped, as Wilcoxon did); exact for up to 50 differences without tied magnitudes, else the normal
    approximation with the tie correction (scipy.stats.wilcoxon's defaults). None below 2 non-zero differences."""
    nonzero = [d for d in differences if d != 0]
    n = len(nonzero)
    if n < 2:
        return None
    ranks = [r + 1 for r in _ranks([abs(d) for d in nonzero])]
    below = sum(r for r, d in zip(ranks, nonzero, strict=True) if d < 0)
    statistic = min(below, n * (n + 1) / 2 - below)
    if n <= 50 and len(set(ranks)) == n:
        counts = [1] + [0] * (n * (n + 1) // 2)  # subsets of 1..n by their sum
        for k in range(1, n + 1):
            for total in range(len(counts) - 1, k - 1, -1):
                counts[total] += counts[total - k]
        return min(1.0, 2 * sum(counts[: int(statistic) + 1]) / 2**n)
    ties = sum(c**3 - c for c in collections.Counter(ranks).values())
    variance = n * (n + 1) * (2 * n + 1) / 24 - ties / 48
    z = (statistic - n * (n + 1) / 4) / math.sqrt(variance)
    return min(1.0, math.erfc(-z / math.sqrt(2)))


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation of paired values (ties take their mean rank); None below 3 pairs or when
    either side is constant."""
    if len(xs) != len(ys) or len(xs) < 3:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None
