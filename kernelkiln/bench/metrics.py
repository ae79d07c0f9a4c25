"""The field's metrics over one suite run (KernelBench's correctness and fast_p, and more).

Per task: correct (some candidate passed the guard), the best speedup over torch eager
(geometric mean over workloads, measured side by side in one evaluation), the first
correct candidate's speedup (for the self-speedup first correct -> best), and the best
candidate's speed-of-light fraction with the term that bounds it (memory: bytes over the
triad bandwidth; compute: FLOPs over the FMA peak) and the rate it reached there. Geometric
means run over the correct tasks only; ``correct_rate`` says how many those are.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from kernelkiln.platforms.sol import Achieved
from kernelkiln.stats import geomean

FAST_P = ("0", "1", "1.5", "2")


@dataclass(frozen=True)
class TaskFigures:
    """One task's figures from one run."""

    name: str
    correct: bool
    best_speedup: float | None  # confirmed when the run confirmed it, else as the search measured it
    first_correct_speedup: float | None
    compile_ratio: float | None  # t_eager / t_compiled of the reference (None: torch.compile unavailable)
    sol_fraction: float | None
    evaluations: int
    tokens: int
    search_speedup: float | None = None  # the best as the search measured it
    reached: Achieved | None = None  # the best's rate on the term that bounds it

    @property
    def speedup_compile(self) -> float | None:
        """The best candidate's speedup over torch.compile of the reference."""
        if self.best_speedup is None or self.compile_ratio is None:
            return None
        return self.best_speedup / self.compile_ratio

    @property
    def self_speedup(self) -> float | None:
        if self.best_speedup is None or not self.first_correct_speedup:
            return None
        return self.best_speedup / self.first_correct_speedup


def fast_p(tasks: list[TaskFigures], p: float) -> float:
    """Share of tasks that are correct and faster than torch eager by more than ``p``."""
    return sum(1 for t in tasks if t.correct and (t.best_speedup or 0.0) > p) / len(tasks) if tasks else 0.0


def median_sol(tasks: list[TaskFigures]) -> dict[str, dict[str, float | int]]:
    """The median speed-of-light fraction over the tasks bound by memory and by compute, with their counts."""
    out: dict[str, dict[str, float | int]] = {}
    for bound in ("memory", "compute"):
        found = [t.sol_fraction for t in tasks if t.reached and t.reached.bound == bound and t.sol_fraction]
        if found:
            out[bound] = {"median": statistics.median(found), "tasks": len(found)}
    return out


def summarize(tasks: list[TaskFigures]) -> dict:
    """The suite's figures: the keys `kiln bench --json` promises, plus per-task rows."""
    correct = [t for t in tasks if t.correct and t.best_speedup]
    selfs = [t.self_speedup for t in correct if t.self_speedup is not None]
    return {
        "correct_rate": len([t for t in tasks if t.correct]) / len(tasks) if tasks else 0.0,
        "fast_p": {p: fast_p(tasks, float(p)) for p in FAST_P},
        "geomean_speedup_eager": geomean([t.best_speedup for t in correct if t.best_speedup is not None]),
        "geomean_speedup_compile": geomean([t.speedup_compile for t in correct if t.speedup_compile]),
        "median_self_speedup": statistics.median(selfs) if selfs else None,
        "sol_fraction": {t.name: t.sol_fraction for t in tasks},
        "median_sol_fraction": median_sol(tasks),
        "evaluations": sum(t.evaluations for t in tasks),
        "tokens": sum(t.tokens for t in tasks),
        "tasks": {
            t.name: {
                "correct": t.correct,
                "best_speedup": t.best_speedup,
                "search_speedup": t.search_speedup,
                "first_correct_speedup": t.first_correct_speedup,
                "self_speedup": t.self_speedup,
                "speedup_compile": t.speedup_compile,
                "compile_ratio": t.compile_ratio,
                "sol_fraction": t.sol_fraction,
                "bound": t.reached.bound if t.reached else None,
                "achieved": t.reached.rate if t.reached else None,
                "achieved_unit": t.reached.unit if t.reached else None,
                "evaluations": t.evaluations,
                "tokens": t.tokens,
            }
            for t in tasks
        },
    }
