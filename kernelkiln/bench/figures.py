"""An ablation's figures, from every run's trajectories: each candidate valued by the study's consensus.

A search evaluation's speedup carries the timing noise of one short measurement, and a run's
best is, by selection, the evaluation whose noise fell kindest. So a candidate (its code, by
hash) is valued by its *consensus* figure: the median of every measurement of it anywhere in
the ablation (every arm, repeat and role: the same code is timed many times over). A run's
incumbent after each evaluation (its latest KEEP) is valued so, which gives its curve; from it:

- final: the incumbent's value when the budget is spent;
- anytime: the curve's mean over the budget (a search that reaches a good kernel early scores higher);
- evaluations to 95%: the first evaluation whose incumbent is worth 95% of the task's best known
  figure (the best consensus over every candidate the ablation measured at least twice), the
  budget + 1 when never.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from kernelkiln.bench.stats import wilcoxon
from kernelkiln.stats import geomean

TARGET = 0.95


@dataclass(frozen=True)
class Step:
    """One evaluation of a trajectory."""

    code: str  # the candidate's code hash
    verdict: str
    speedup: float | None  # as this evaluation measured it (None: not correct or not timed)
    prompt_tokens: int = 0
    max_prompt_tokens: int = 0

    def to_list(self) -> list:
        return [self.code, self.verdict, self.speedup, self.prompt_tokens, self.max_prompt_tokens]

    @classmethod
    def from_list(cls, row: list) -> Step:
        return cls(*row)


Trajectory = list[Step]


class Consensus:
    """Each (task, code) pair's median measured speedup over every trajectory given."""

    def __init__(self, runs: Iterable[dict[str, Trajectory]]):
        seen: dict[tuple[str, str], list[float]] = {}
        for run in runs:
            for task, steps in run.items():
                for step in steps:
                    if step.verdict != "REJECT" and step.speedup:
                        seen.setdefault((task, step.code), []).append(step.speedup)
        self.values = {key: statistics.median(v) for key, v in seen.items()}
        self.counts = {key: len(v) for key, v in seen.items()}

    def value(self, task: str, code: str | None) -> float:
        return self.values.get((task, code), 0.0) if code else 0.0

    def best(self, task: str) -> float:
        """The task's best known figure: over candidates measured twice or more, else over every one."""
        mine = [(v, self.counts[k]) for k, v in self.values.items() if k[0] == task]
        repeated = [v for v, n in mine if n >= 2]
        return max(repeated or [v for v, _ in mine], default=0.0)


def incumbents(steps: Trajectory) -> list[str | None]:
    """The incumbent (its code) after each evaluation: the latest KEEP's."""
    current, out = None, []
    for step in steps:
        if step.verdict == "KEEP":
            current = step.code
        out.append(current)
    return out


def curve(task: str, steps: Trajectory, consensus: Consensus, budget: int) -> list[float]:
    """The incumbent's consensus value after each of ``budget`` evaluations (its last value once the run ended)."""
    values = [consensus.value(task, code) for code in incumbents(steps)][:budget]
    return values + [values[-1] if values else 0.0] * (budget - len(values))


def reached(values: list[float], target: float) -> int | None:
    """The first evaluation (1-based) whose value reaches ``target``; None when none does."""
    return next((i + 1 for i, v in enumerate(values) if target > 0 and v >= target), None)


@dataclass(frozen=True)
class TaskFigures:
    final: float
    anytime: float
    evals_to_target: int  # budget + 1 when never reached
    search_best: float | None  # the run's best as its own evaluation measured it
    normalized: list[float]  # the curve over the task's best known figure


def task_figures(task: str, steps: Trajectory, consensus: Consensus, budget: int) -> TaskFigures:
    values = curve(task, steps, consensus, budget)
    best = consensus.best(task)
    hit = reached(values, TARGET * best)
    own = [s.speedup for s in steps if s.verdict == "KEEP" and s.speedup]
    return TaskFigures(
        final=values[-1],
        anytime=sum(values) / budget,
        evals_to_target=hit or budget + 1,
        search_best=own[-1] if own else None,
        normalized=[v / best if best > 0 else 0.0 for v in values],
    )


def run_figures(tasks: dict[str, Trajectory], consensus: Consensus, budget: int) -> dict:
    """One run's figures over its measured tasks: geometric means, and per task."""
    per = {t: task_figures(t, steps, consensus, budget) for t, steps in tasks.items()}
    prompts = [s.prompt_tokens for steps in tasks.values() for s in steps]
    return {
        "speedup": geomean([f.final for f in per.values() if f.final > 0]),
        "anytime": geomean([f.anytime for f in per.values() if f.anytime > 0]),
        "evals_to_95": geomean([f.evals_to_target for f in per.values()]),
        "prompt_tokens": sum(prompts) or None,
        "max_prompt_tokens": max((s.max_prompt_tokens for steps in tasks.values() for s in steps), default=0) or None,
        "tasks": {
            t: {
                "final": f.final,
                "anytime": f.anytime,
                "evals_to_95": f.evals_to_target,
                "search_best": f.search_best,
                "evaluations": len(tasks[t]),
            }
            for t, f in per.items()
        },
        "normalized": {t: f.normalized for t, f in per.items()},
    }


def willemsen(normalized: list[float], random: list[float]) -> float | None:
    """Willemsen et al.'s score over a budget window: the area between random search's expected curve and this
    curve, over the area between random search and the optimum (1 at the optimum from the first evaluation, 0
    no better than random, negative worse); curves are over the task's optimum. None when random search
    already sits at the optimum throughout (nothing to improve on)."""
    n = min(len(normalized), len(random))
    room = sum(1.0 - r for r in random[:n])
    return sum(c - r for c, r in zip(normalized[:n], random[:n], strict=True)) / room if room > 1e-12 else None


def reuse_figures(
    second: dict[str, Trajectory], first: dict[str, Trajectory], consensus: Consensus, budget: int
) -> dict:
    """The second pass over tasks a store already holds: evaluations until each reached 95% of its first pass's best
    (the value of the first pass's final incumbent), ``budget`` + 1 when it never did."""
    counts = {}
    for task, steps in second.items():
        target = TARGET * curve(task, first[task], consensus, len(first[task]) or 1)[-1]
        counts[task] = reached(curve(task, steps, consensus, budget), target) or budget + 1
    spent = {task: len(steps) for task, steps in second.items()}
    return {
        "evaluations_to_first_best": statistics.fmean(counts.values()) if counts else None,
        "in_one": sum(1 for c in counts.values() if c == 1),
        "tasks": counts,
        "evaluations_spent": statistics.fmean(spent.values()) if spent else None,
    }


def reach_share(normalized: Iterable[list[float]], budget: int) -> list[float]:
    """Share of (task, repeat) curves within 95% of their best known figure after each evaluation."""
    curves = list(normalized)
    if not curves:
        return []
    return [sum(1 for c in curves if c[i] >= TARGET) / len(curves) for i in range(budget)]


def across_tasks(arm: dict[int, dict], reference: dict[int, dict]) -> dict:
    """Wilcoxon's signed-rank test across tasks: each task's evaluations to 95% averaged over the repeats, arm
    against reference, paired by task."""

    def per_task(runs: dict[int, dict]) -> dict[str, float]:
        tasks = {t for r in runs.values() for t in r["tasks"]}
        return {
            t: statistics.fmean(r["tasks"][t]["evals_to_95"] for r in runs.values() if t in r["tasks"]) for t in tasks
        }

    mine, theirs = per_task(arm), per_task(reference)
    shared = sorted(set(mine) & set(theirs))
    return {
        "evals_to_95_p": wilcoxon([mine[t] - theirs[t] for t in shared]),
        "tasks": len(shared),
        "fewer": sum(mine[t] < theirs[t] for t in shared),
        "more": sum(mine[t] > theirs[t] for t in shared),
    }
