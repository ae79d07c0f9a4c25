"""Twin processes running the same kernel: how far apart do they read, with and without the stack shifted?

    python benchmarks/stack_twins.py [--pairs 16] [--json]

Each pair is two fresh processes with the same tuned C row softmax (the guard_soak's fast candidate, as the
guard's worker calls it: a fresh output tensor each call), timed in alternation on one core for 30 rounds;
the pair's figure is the median of the paired ratios, 1.0 for identical code. Arms, interleaved pair by pair:

as-is:    each batch called where the process's stack happens to lie (its offset in a page set by ASLR)
shifted:  each batch through kernelkiln.guard.worker.stack.StackShifter, at a fresh random stack offset,
          as every guard worker times since it was added

Per arm: the pairs' figures, how many lie beyond 5% of 1.0, and the page faults per call of each process's
timed rounds (none expected: a fault-free loop rules the allocator out). Figures are ratios measured side by
side; nothing here is an absolute time.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
ROUNDS, CALLS = 30, 10
CHILD = """
import os, resource, sys
sys.path.insert(0, {root!r})
import torch
from kernelkiln.guard.worker.stack import StackShifter, shim_library
from kernelkiln.task import knobs
torch.set_num_threads(1)
os.sched_setaffinity(0, [max(os.sched_getaffinity(0))])
shifter = StackShifter()
if sys.argv[1] == "shifted":
    shifter.load(*shim_library())
seed = open({seed!r}).read()
space = {{"__name__": "seed"}}
exec(knobs.apply(seed, {{"FLAGS": ["-O3", "-march=native", "-ffast-math"], "ACCUMULATORS": 4}}), space)
model, x = space["ModelNew"](), torch.randn(256, 1024)


def batch():
    for _ in range({calls}):
        model(x)


for _ in range(2):
    shifter.run(batch)
for _ in sys.stdin:
    faults, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, __import__("time").perf_counter()
    shifter.run(batch)
    took = __import__("time").perf_counter() - start
    print(took, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / {calls}, flush=True)
"""


def twin_pair(arm: str) -> tuple[float, list[float]]:
    """One pair's median paired ratio, and each round's page faults per call (both processes)."""
    script = CHILD.format(root=str(ROOT), seed=str(ROOT / "kernelkiln/examples/seeds/row_softmax.py"), calls=CALLS)
    procs = [
        subprocess.Popen([sys.executable, "-c", script, arm], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    logs, faults = [], []
    try:
        for _ in range(ROUNDS):
            times = []
            for proc in procs:
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
                took, per_call = proc.stdout.readline().split()
                times.append(float(took))
                faults.append(float(per_call))
            logs.append(math.log(times[0] / times[1]))
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return math.exp(statistics.median(logs)), faults


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=16, help="pairs per arm (default 16)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    figures: dict[str, list[float]] = {"as-is": [], "shifted": []}
    faults: dict[str, list[float]] = {"as-is": [], "shifted": []}
    for k in range(args.pairs):
        for arm in figures:
            figure, per_call = twin_pair(arm)
            figures[arm].append(figure)
            faults[arm].extend(per_call)
            print(f"pair {k + 1}/{args.pairs} {arm}: {figure:.3f}", file=sys.stderr, flush=True)
    report = {
        arm: {
            "figures": sorted(round(f, 4) for f in figs),
            "beyond_5pct": sum(abs(math.log(f)) > math.log(1.05) for f in figs),
            "faults_per_call_median": statistics.median(faults[arm]),
            "rounds_faulting": sum(f > 1 for f in faults[arm]),
            "rounds": len(faults[arm]),
        }
        for arm, figs in figures.items()
    }
    if args.json:
        print(json.dumps(report))
        return
    for arm, r in report.items():
        print(
            f"{arm:8} beyond 5%: {r['beyond_5pct']}/{len(r['figures'])}  figures {r['figures'][0]:.3f}-"
            f"{r['figures'][-1]:.3f}  rounds faulting: {r['rounds_faulting']}/{r['rounds']}"
        )


if __name__ == "__main__":
    main()
