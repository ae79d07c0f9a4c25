"""The tuner on each bundled example: best speedup over the seed and over the reference.

    python benchmarks/optimize_examples.py [--json] [--budget 30] [--tasks row_softmax,matmul]

Each task gets a fresh store (no memory carried between tasks) and one agent with the
default guard, so the figures are what `kiln optimize TASK` gives on this machine.
Speedups are geometric means over the task's workloads, each measured side by side
with the reference in the same evaluation; over_seed = best / seed.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.store import open_store
from kernelkiln.task import bundled_suites


def run_task(path: Path, budget: int, tmp: Path) -> dict:
    store = open_store(f"sqlite:///{tmp / (path.stem + '.db')}")
    started = time.perf_counter()
    result = Optimizer(Memory(store), tmp).start(
        [TaskSpec(str(path), {})], OptimizeConfig(budget=budget), tmp / path.stem
    )
    task = next(iter(result.tasks.values()))
    best, seed = task.best_speedup, task.start_speedup
    return {
        "best_speedup": best,
        "seed_speedup": seed,
        "over_seed": best / seed if best and seed else None,
        "attempts": task.attempts,
        "verdicts": task.verdicts,
        "best_summary": task.best_summary,
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--tasks", default="", help="comma-separated task names (default: every bundled example)")
    args = parser.parse_args()
    paths = bundled_suites()["examples"].task_paths()
    if args.tasks:
        paths = [p for p in paths if p.stem in args.tasks.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        out = {p.stem: run_task(p, args.budget, Path(tmp)) for p in paths}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for name, r in out.items():
        print(
            f"{name:12s} seed {r['seed_speedup']:.3f}x  best {r['best_speedup']:.3f}x over the reference  "
            f"({r['over_seed']:.2f}x over the seed, {r['attempts']} evaluations, {r['seconds']} s): "
            f"{r['best_summary']}"
        )


if __name__ == "__main__":
    main()
