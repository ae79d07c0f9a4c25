"""Memory transfer: does what the tuner learned on task A make task B of the same family converge faster?

    python benchmarks/memory_transfer.py [--json] [--budget-a 30] [--budget-b 20] [--repeat 1]

A = row_softmax, B = log_softmax: different computations and workloads, the same knob
vocabulary. For each repeat, B is optimized twice with the same budget: once on a fresh
store, once on a store that holds A's run. The figure is the number of evaluations each
needed to reach 95% of B's best speedup (the better of the two runs' finals, so both
aim at one target; a run that never reaches it counts budget + 1). Target: with memory,
at most half.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
from pathlib import Path

from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.store import open_store
from kernelkiln.task import bundled_suites

EXAMPLES = bundled_suites()["examples"].path


def optimize(db: Path, task: str, budget: int, out: Path) -> list:
    """The run's attempts, oldest first."""
    memory = Memory(open_store(f"sqlite:///{db}"))
    result = Optimizer(memory, out).start(
        [TaskSpec(str(EXAMPLES / f"{task}.py"), {})], OptimizeConfig(budget=budget), out / task
    )
    with memory.store.read() as conn:
        return memory.store.attempts.for_run(conn, result.run_id)


def best_curve(attempts: list) -> list[float]:
    """The incumbent's speedup after each evaluation."""
    curve, best = [], 0.0
    for a in attempts:
        if a.verdict == "KEEP" and a.speedup:
            best = a.speedup
        curve.append(best)
    return curve


def evaluations_to(curve: list[float], target: float) -> int:
    return next((i + 1 for i, s in enumerate(curve) if s >= target), len(curve) + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--budget-a", type=int, default=30)
    parser.add_argument("--budget-b", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    trials = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        a_db = root / "a.db"
        optimize(a_db, "row_softmax", args.budget_a, root)
        for r in range(args.repeat):
            fresh = best_curve(optimize(root / f"fresh{r}.db", "log_softmax", args.budget_b, root))
            warm_db = root / f"warm{r}.db"
            shutil.copy(a_db, warm_db)
            warm = best_curve(optimize(warm_db, "log_softmax", args.budget_b, root))
            target = 0.95 * max(fresh[-1], warm[-1])
            trials.append(
                {
                    "fresh": evaluations_to(fresh, target),
                    "with_memory": evaluations_to(warm, target),
                    "fresh_best": fresh[-1],
                    "with_memory_best": warm[-1],
                    "target": target,
                    "fresh_curve": fresh,
                    "with_memory_curve": warm,
                }
            )
    out = {
        "task_a": "row_softmax",
        "task_b": "log_softmax",
        "budget_b": args.budget_b,
        "trials": trials,
        "median_fresh": statistics.median(t["fresh"] for t in trials),
        "median_with_memory": statistics.median(t["with_memory"] for t in trials),
    }
    out["ratio"] = out["median_with_memory"] / out["median_fresh"]
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for t in trials:
        print(
            f"evaluations to 95% of {t['target']:.3f}x: fresh {t['fresh']}, with A's memory {t['with_memory']} "
            f"(finals {t['fresh_best']:.3f}x vs {t['with_memory_best']:.3f}x)"
        )
    print(f"median ratio with/without memory: {out['ratio']:.2f} (target ≤ 0.5)")


if __name__ == "__main__":
    main()
