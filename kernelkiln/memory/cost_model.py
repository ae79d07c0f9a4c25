"""A cost model across stored tasks: each knob value's effect on a configuration's rank within its task.

Ansor, MetaSchedule and TLP rank a new task's untried configurations with a model trained on every task
measured before, so that its first evaluations go to the configurations most likely to be fast. Here the
model is additive (main effects): a configuration's score is the sum of its knob values' effects, and a
value's effect is how far above or below its task's mean rank the trials holding it came, pooled over the
stored tasks, each weighted by its nearness to the new task (1 / (1 + distance)) and shrunk toward no effect
by ``SHRINK`` trials' worth of evidence. Ranks (0 the task's slowest, 1 its fastest) make tasks of different
scale comparable, as they do for the sampler's lent trials. An additive model has its best configurations in
closed form: the best value of each knob, then the next best by the smallest loss of score (``best``).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from kernelkiln.task import knobs as K

SHRINK = 3.0  # trials' worth of no-effect evidence every value starts with


@dataclass(frozen=True)
class TaskTrials:
    """One stored task's trials for the model: (settings, rank in [0, 1]; below 0 failed), and its weight."""

    weight: float
    trials: tuple[tuple[K.Settings, float], ...]


@dataclass(frozen=True)
class CostModel:
    """Each knob value's effect on rank (``K.Value`` -> effect), from ``tasks`` stored tasks."""

    effects: dict[K.Value, float]
    tasks: int

    def score(self, settings: K.Settings) -> float:
        """The configuration's predicted rank above its task's mean."""
        return sum(self.effects.get(v, 0.0) for v in K.values_of(settings))

    def best(self, options: dict[str, tuple[object, ...]], base: K.Settings, n: int) -> list[K.Settings]:
        """The ``n`` configurations of ``options`` the model scores highest, best first; a knob the model knows
        nothing of keeps ``base``'s value. Empty when the model knows none of the knobs."""
        ranked: dict[str, list[tuple[float, object]]] = {}
        for name, values in options.items():
            scored = [(self.effects.get((name, K.key({"v": v}))), v) for v in values]
            if any(effect is not None for effect, _ in scored):  # unknown values: no effect; ties: the base's first
                known = [(effect or 0.0, v) for effect, v in scored]
                ranked[name] = sorted(known, key=lambda sv: (-sv[0], not K.same(sv[1], base.get(name))))
        if not ranked:
            return []
        names = list(ranked)
        start = (0,) * len(names)
        heap = [(0.0, start)]
        seen = {start}
        out: list[K.Settings] = []
        while heap and len(out) < n:
            loss, at = heapq.heappop(heap)
            out.append({**base, **{name: ranked[name][i][1] for name, i in zip(names, at, strict=True)}})
            for j, name in enumerate(names):
                if at[j] + 1 < len(ranked[name]):
                    nxt = (*at[:j], at[j] + 1, *at[j + 1 :])
                    if nxt not in seen:
                        seen.add(nxt)
                        step = ranked[name][at[j]][0] - ranked[name][at[j] + 1][0]
                        heapq.heappush(heap, (loss + step, nxt))
        return out


def fit(tasks: list[TaskTrials]) -> CostModel | None:
    """The model from stored tasks' trials; None when no task has two measured trials to compare."""
    sums: dict[K.Value, float] = {}
    weights: dict[K.Value, float] = {}
    used = 0
    for task in tasks:
        ranks = [(settings, max(rank, 0.0)) for settings, rank in task.trials if settings]
        if len(ranks) < 2 or task.weight <= 0:
            continue
        used += 1
        mean = sum(r for _, r in ranks) / len(ranks)
        for settings, rank in ranks:
            for value in K.values_of(settings):
                sums[value] = sums.get(value, 0.0) + task.weight * (rank - mean)
                weights[value] = weights.get(value, 0.0) + task.weight
    if not used:
        return None
    return CostModel({v: sums[v] / (weights[v] + SHRINK) for v in sums}, used)
