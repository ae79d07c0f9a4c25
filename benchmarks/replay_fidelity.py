"""Fidelity of a replay: configurations of a measured-spaces dataset judged again, later, by the real guard.

    python benchmarks/replay_fidelity.py [--data DATASET] [--out benchmarks/data/fidelity-cpu.jsonl]
                                         [--share 0.05] [--json] [--summary-only]

From every task of the dataset (this machine's rows): its measured optimum, its seed, and a seeded uniform
share (--share, at least one) of its other timed configurations. Each is judged once more by the real guard at
the dataset's settings (`kiln measure`'s Measurer, replicate none), into --out (resumable: run it again to
continue). Then, against the table (each configuration's figure: the geometric mean of its measurements):

  spearman_within  per task with 3 or more re-judged configurations, Spearman's rank correlation of the table's
                   figures and the re-judged ones; their median
  spearman_pooled  the same over every re-judged configuration, each figure over its task's table optimum (so
                   tasks' scales do not decide it)
  ratio            per configuration, re-judged figure / table figure: median and the 10th-90th percentiles
  optimum_kept     share of tasks whose table optimum re-judges within 5% of the best re-judged figure there
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

from kernelkiln.bench.measure import Measurer, SpacePlan
from kernelkiln.bench.space_values import figure
from kernelkiln.bench.stats import spearman
from kernelkiln.cli.paths import target_paths
from kernelkiln.evaluation.spaces import Dataset
from kernelkiln.guard.config import GuardConfig
from kernelkiln.task import load_task

SUITES = "cpu,examples,kb-cpu"


def plans(data: Dataset, machine: str, share: float) -> list[SpacePlan]:
    tasks = {}
    for path in target_paths(SUITES):
        task = load_task(path)
        tasks.setdefault(task.id, task)
    chosen = []
    for task_id, configs in sorted(data.spaces(machine).items()):
        task, space = tasks.get(task_id), data.space_records.get((machine, task_id))
        if task is None or space is None:
            continue
        figures = {key: f for key, rows in configs.items() if (f := figure(rows)) is not None}
        if not figures:
            continue
        optimum = max(figures, key=lambda k: figures[k])
        seed = next((k for k, rows in configs.items() if rows[0].seed), optimum)
        rest = sorted(k for k in figures if k not in (optimum, seed))
        rng = random.Random(f"fidelity:{task_id}")
        picked = [optimum, seed, *rng.sample(rest, min(len(rest), max(1, round(share * len(figures)))))]
        settings = [configs[k][0].settings for k in dict.fromkeys(picked)]
        chosen.append(SpacePlan(task, space.seed, space.size, settings))
    return chosen


def agreement(data: Dataset, again: Dataset, machine: str) -> dict:
    table = data.spaces(machine)
    redone = again.spaces(again.one_machine()) if again.rows else {}
    within, pooled_t, pooled_r, ratios, kept = [], [], [], [], []
    for task_id, configs in redone.items():
        pairs = [
            (t, r)
            for key, rows in configs.items()
            if (r := figure(rows)) is not None and (t := figure(table.get(task_id, {}).get(key, []))) is not None
        ]
        if not pairs:
            continue
        best = max(f for rows in table[task_id].values() if (f := figure(rows)) is not None)
        pooled_t += [t / best for t, _ in pairs]
        pooled_r += [r / best for _, r in pairs]
        ratios += [r / t for t, r in pairs]
        if len(pairs) >= 3 and (rho := spearman([t for t, _ in pairs], [r for _, r in pairs])) is not None:
            within.append(rho)
        top = max(pairs, key=lambda p: p[0])  # the table's optimum among the re-judged
        kept.append(top[1] >= 0.95 * max(r for _, r in pairs))
    ratios.sort()
    q = lambda p: ratios[min(len(ratios) - 1, int(p * len(ratios)))] if ratios else None  # noqa: E731
    return {
        "tasks": len(kept),
        "configurations": len(ratios),
        "spearman_within": statistics.median(within) if within else None,
        "spearman_within_tasks": len(within),
        "spearman_pooled": spearman(pooled_t, pooled_r) if len(pooled_t) >= 3 else None,
        "ratio": {"median": q(0.5), "p10": q(0.1), "p90": q(0.9)},
        "optimum_kept": sum(kept) / len(kept) if kept else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("benchmarks/data/spaces-cpu.jsonl"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/data/fidelity-cpu.jsonl"))
    parser.add_argument("--share", type=float, default=0.05)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--summary-only", action="store_true", help="report what --out holds; judge nothing")
    args = parser.parse_args()
    data = Dataset(args.data)
    machine = data.one_machine()
    again = Dataset(args.out)
    if not args.summary_only:
        measurer = Measurer(again, GuardConfig(), rounds=1, progress=lambda line: print(line, file=sys.stderr))
        if measurer.machine.key != machine:
            print(f"this machine ({measurer.machine.key}) is not the dataset's ({machine})", file=sys.stderr)
            return 2
        measurer.run(plans(data, machine, args.share))
        again = Dataset(args.out)
    result = agreement(data, again, machine)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:24} {value if not isinstance(value, float) else round(value, 3)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
