"""What a measured space is worth searching: its optimum over its seed and over its median configuration.

A configuration's figure is the geometric mean of its measurements' figures over the reference. A space is
*flat* when its optimum lies within the noise band of its seed (the wider of the two configurations' bands):
searching it cannot show anything, and a study leaves it out, saying so. Random search without replacement
needs (n + 1) / (g + 1) evaluations on average to reach one of the g configurations within 5% of the optimum
among n (the expected position of the first of g marked items in a random order): the exact floor.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any

from kernelkiln.bench.figures import Consensus
from kernelkiln.bench.stats import spearman
from kernelkiln.evaluation.spaces import Dataset, Measurement
from kernelkiln.policy.turn import code_hash
from kernelkiln.stats import geomean
from kernelkiln.task import knobs as K


@dataclass(frozen=True)
class SpaceValue:
    task: str
    configs: int  # configurations measured
    timed: int  # of them, with a figure
    start: float | None
    median: float | None
    optimum: float | None
    optimum_config: str | None
    over_start: float | None
    over_median: float | None
    flat: bool
    random_evals_to_95: float | None  # expected, for random search without replacement: (n + 1) / (good + 1)
    rounds_agreement: float | None = None  # Spearman's rank correlation of the configurations' first two rounds

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def figure(rows: list[Measurement]) -> float | None:
    """A configuration's figure over the reference: the geometric mean over its timed measurements."""
    figures = [f for r in rows if (f := r.speedup) is not None]
    return geomean(figures) if figures else None


def band(rows: list[Measurement]) -> float:
    return max((r.margin or 0.0 for r in rows), default=0.0)


def space_value(task: str, configs: dict[str, list[Measurement]]) -> SpaceValue:
    """The value of one task's measured space."""
    figures = {key: f for key, rows in configs.items() if (f := figure(rows)) is not None}
    start_key = next((key for key, rows in configs.items() if rows[0].seed), next(iter(configs)))
    start = figures.get(start_key)
    if not figures:
        return SpaceValue(task, len(configs), 0, start, None, None, None, None, None, True, None)
    best = max(figures, key=figures.__getitem__)
    optimum, median = figures[best], statistics.median(figures.values())
    over_start = optimum / start if start else None
    flat = over_start is not None and math.log(over_start) <= max(band(configs[best]), band(configs[start_key]))
    good = sum(f >= 0.95 * optimum for f in figures.values())
    evals = (len(configs) + 1) / (good + 1)
    pairs = [(rows[0].speedup, rows[1].speedup) for rows in configs.values() if len(rows) > 1]
    present = [(a, b) for a, b in pairs if a is not None and b is not None]
    agreement = spearman([a for a, _ in present], [b for _, b in present])
    return SpaceValue(
        task,
        len(configs),
        len(figures),
        start,
        median,
        optimum,
        best,
        over_start,
        optimum / median,
        flat,
        evals,
        agreement,
    )


def space_values(dataset: Dataset, machine: str, tasks: list[str] | None = None) -> list[SpaceValue]:
    """The value of each measured space of ``machine`` (``tasks``: these, in this order)."""
    spaces = dataset.spaces(machine)
    chosen = tasks if tasks is not None else sorted(spaces)
    return [space_value(task, spaces[task]) for task in chosen if task in spaces]


def random_curve(figures: list[float], budget: int) -> list[float]:
    """Random search without replacement over a space with these figures: the expected best after each of
    ``budget`` evaluations, exactly (the best of i draws is at most the j-th smallest with probability
    C(j, i) / C(n, i)); flat at the optimum once the space is exhausted."""
    ordered, n = sorted(figures), len(figures)
    out = []
    for i in range(1, budget + 1):
        if i >= n:
            out.append(ordered[-1])
            continue
        total = math.comb(n, i)
        out.append(sum(f * (math.comb(j, i) - math.comb(j - 1, i)) for j, f in enumerate(ordered, 1)) / total)
    return out


class TableConsensus(Consensus):
    """A replayed study's figures: each candidate valued by its configuration's figure in the dataset, and each
    task's best known figure its measured optimum (not the best the study happened to find)."""

    def __init__(self, dataset: Dataset, machine: str):
        super().__init__([])
        self.figures: dict[str, list[float]] = {}
        self.optimum: dict[str, float] = {}
        for task, configs in dataset.spaces(machine).items():
            space = dataset.space_records.get((machine, task))
            for rows in configs.values():
                value = figure(rows)
                if value is None:
                    continue
                self.figures.setdefault(task, []).append(value)
                if space is not None:
                    codes = {code_hash(K.apply(space.seed, rows[0].settings))}
                    codes |= {code_hash(space.seed)} if rows[0].seed else set()
                    for code in codes:
                        self.values[(task, code)] = value
                        self.counts[(task, code)] = len(rows)
            if task in self.figures:
                self.optimum[task] = max(self.figures[task])

    def best(self, task: str) -> float:
        return self.optimum.get(task, 0.0)

    def random(self, task: str, budget: int) -> list[float]:
        """Random search's expected curve on ``task``, over its optimum."""
        best = self.best(task)
        return [v / best for v in random_curve(self.figures.get(task, []), budget)] if best > 0 else []
