"""Per task, each arm's mean evaluations to 95% of the measured optimum in a replayed ablation.

    python benchmarks/replay_per_task.py ABLATION_DIR [--data benchmarks/data/spaces-cpu.jsonl] [--budget 20]

Reads ABLATION_DIR/runs.jsonl (a `kiln ablate --replay` run) and prints one row per task: its space's
optimum over its seed, then each arm's mean evaluations to 95% over the repeats (budget + 1 when never):
where an arm wins or loses, task by task, which the study's geometric means do not show.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path

from kernelkiln.bench.figures import Step, task_figures
from kernelkiln.bench.space_values import TableConsensus, space_values
from kernelkiln.evaluation.spaces import Dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ablation", type=Path)
    parser.add_argument("--data", type=Path, default=Path("benchmarks/data/spaces-cpu.jsonl"))
    parser.add_argument("--budget", type=int, default=20)
    args = parser.parse_args()
    data = Dataset(args.data)
    machine = data.one_machine()
    table = TableConsensus(data, machine)
    evals: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for line in (args.ablation / "runs.jsonl").read_text().splitlines():
        unit = json.loads(line)
        for task, passes in unit["tasks"].items():
            for entry in passes.values():
                if entry["role"] == "measured":
                    steps = [Step.from_list(s) for s in entry["steps"]][: args.budget]
                    figures = task_figures(task, steps, table, args.budget)
                    evals[task][unit["arm"]].append(figures.evals_to_target)
    arms = list(dict.fromkeys(arm for per in evals.values() for arm in per))
    values = {v.task: v for v in space_values(data, machine, list(evals))}
    print("task".ljust(34) + "opt/seed " + " ".join(a[:14].rjust(14) for a in arms))
    for task in sorted(evals, key=lambda t: values[t].over_start or 0):
        cells = [f"{statistics.mean(evals[task][a]):14.1f}" if evals[task][a] else " " * 14 for a in arms]
        print(task[:33].ljust(34) + f"{values[task].over_start or 0:8.2f} " + " ".join(cells))


if __name__ == "__main__":
    main()
