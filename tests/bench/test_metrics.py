"""The suite metrics, by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kernelkiln.bench.metrics import TaskFigures, fast_p, summarize
from kernelkiln.platforms.sol import Achieved


def figures(name, correct=True, best=2.0, first=1.0, ratio=2.0, sol=0.5):
    return TaskFigures(name, correct, best if correct else None, first if correct else None, ratio, sol, 10, 0)


def test_fast_p_counts_correct_tasks_faster_than_p():
    tasks = [figures("a", best=0.8), figures("b", best=1.2), figures("c", best=2.5), figures("d", correct=False)]
    assert [fast_p(tasks, p) for p in (0, 1, 1.5, 2)] == [0.75, 0.5, 0.25, 0.25]


def test_the_summary_has_the_promised_keys_and_geometric_means_over_correct_tasks():
    out = summarize(
        [
            figures("a", best=2.0, first=1.0, ratio=2.0),
            figures("b", best=8.0, first=2.0, ratio=None),
            figures("c", correct=False),
        ]
    )
    assert set(out) >= {
        "correct_rate",
        "fast_p",
        "geomean_speedup_eager",
        "geomean_speedup_compile",
        "median_self_speedup",
        "sol_fraction",
        "tasks",
    }
    assert out["correct_rate"] == pytest.approx(2 / 3)
    assert out["geomean_speedup_eager"] == pytest.approx(4.0)  # sqrt(2 * 8)
    assert out["geomean_speedup_compile"] == pytest.approx(1.0)  # only a: 2.0 / 2.0
    assert out["median_self_speedup"] == pytest.approx(3.0)  # median of 2 and 4
    assert set(out["fast_p"]) == {"0", "1", "1.5", "2"}
    assert out["sol_fraction"] == {"a": 0.5, "b": 0.5, "c": 0.5}


def test_the_median_sol_fraction_is_taken_per_bounding_term_and_each_task_names_its_bound():
    memory, compute = Achieved("memory", 8.0, 16.0), Achieved("compute", 60.0, 120.0)
    tasks = [
        replace(figures("a", sol=0.2), reached=memory),
        replace(figures("b", sol=0.4), reached=memory),
        replace(figures("c", sol=0.9), reached=memory),
        replace(figures("d", sol=0.5), reached=compute),
        figures("e", sol=None),  # no FLOPs or bytes known: in neither median
    ]
    out = summarize(tasks)
    assert out["median_sol_fraction"] == {"memory": {"median": 0.4, "tasks": 3}, "compute": {"median": 0.5, "tasks": 1}}
    assert (out["tasks"]["a"]["bound"], out["tasks"]["a"]["achieved"], out["tasks"]["a"]["achieved_unit"]) == (
        "memory",
        8.0,
        "GB/s",
    )
    assert out["tasks"]["e"]["bound"] is None
