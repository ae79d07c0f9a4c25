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

from kernelkiln.evaluation.spaces import Dataset, Measurement
from kernelkiln.stats import geomean


@dataclass(frozen=True)
class SpaceValue:
    task: str
    configs: int  # configurations measured
    timed: int  # of them, with a figure
    seed: float | None
    median: float | None
    optimum: float | None
    optimum_config: str | None
    over_seed: float | None
    over_median: float | None
    flat: bool
    random_evals_to_95: float | None  # expected, for random search without replacement: (n + 1) / (good + 1)

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
    seed_key = next((key for key, rows in configs.items() if rows[0].seed), next(iter(configs)))
    seed = figures.get(seed_key)
    if not figures:
        return SpaceValue(task, len(configs), 0, seed, None, None, None, None, None, True, None)
    best = max(figures, key=figures.__getitem__)
    optimum, median = figures[best], statistics.median(figures.values())
    over_seed = optimum / seed if seed else None
    flat = over_seed is not None and math.log(over_seed) <= max(band(configs[best]), band(configs[seed_key]))
    good = sum(f >= 0.95 * optimum for f in figures.values())
    evals = (len(configs) + 1) / (good + 1)
    return SpaceValue(
        task, len(configs), len(figures), seed, median, optimum, best, over_seed, optimum / median, flat, evals
    )


def space_values(dataset: Dataset, machine: str, tasks: list[str] | None = None) -> list[SpaceValue]:
    """The value of each measured space of ``machine`` (``tasks``: these, in this order)."""
    spaces = dataset.spaces(machine)
    chosen = tasks if tasks is not None else sorted(spaces)
    return [space_value(task, spaces[task]) for task in chosen if task in spaces]
