"""Twin processes running the same kernel: how far apart do they read, with the stack where ASLR put it or shifted?

    python benchmarks/stack_twins.py [--pairs 16] [--json]

Each pair is two fresh processes with the same tuned C row softmax (the guard_soak's fast candidate, as the
guard's worker calls it: a fresh output tensor each call), timed in alternation on one core for 30 rounds;
the pair's figure is the median of the paired ratios, 1.0 for identical code. Arms, interleaved pair by pair:

as-is:      each batch called where the process's stack happens to lie (its offset in a page set by ASLR),
            as the guard's workers time
per-batch:  each batch below a fresh random 0-4,080 bytes of stack (SHIM: alloca, then call back)
per-call:   each call of the batch below its own fresh random offset

Per arm: the pairs' figures, how many lie beyond 5% of 1.0, the spread of a pair's rounds (median absolute
deviation of their log-ratios: the noise a band must cover), and the page faults per call of each process's
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

from kernelkiln import native

ROOT = Path(__file__).resolve().parents[1]
ROUNDS, CALLS = 30, 10
ARMS = ("as-is", "per-batch", "per-call")
SHIM = r"""
#include <alloca.h>
#include <stddef.h>
#include <stdint.h>
typedef int (*step_fn)(int64_t);
static __attribute__((noinline)) int at(size_t pad, step_fn step, int64_t i) {
    volatile char* room = alloca(pad + 1);
    room[0] = 0;
    int stop = step(i);
    room[pad] = 0;
    return stop;
}
void shifted(int64_t count, uint64_t seed, int64_t each, step_fn step) {
    uint64_t x = seed | 1, pad = 0;
    for (int64_t i = 0; i < count; ++i) {
        if (i == 0 || each) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; pad = ((x >> 11) % 256) * 16; }
        if (at(pad, step, i)) return;
    }
}
"""
CHILD = """
import ctypes, os, random, resource, sys, time
sys.path.insert(0, {root!r})
import torch
from kernelkiln.task import knobs
torch.set_num_threads(1)
os.sched_setaffinity(0, [max(os.sched_getaffinity(0))])
seed = open({seed!r}).read()
space = {{"__name__": "seed"}}
exec(knobs.apply(seed, {{"FLAGS": ["-O3", "-march=native", "-ffast-math"], "ACCUMULATORS": 4}}), space)
model, x = space["ModelNew"](), torch.randn(256, 1024)
STEP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64)
shim = ctypes.CDLL({shim!r}).shifted
shim.argtypes = [ctypes.c_int64, ctypes.c_uint64, ctypes.c_int64, STEP]


def call(_):
    model(x)
    return 0


step = STEP(call)


def batch():
    if sys.argv[1] == "as-is":
        for _ in range({calls}):
            model(x)
    else:
        shim({calls}, random.getrandbits(64), sys.argv[1] == "per-call", step)


for _ in range(2):
    batch()
for _ in sys.stdin:
    faults, start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.perf_counter()
    batch()
    took = time.perf_counter() - start
    print(took, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / {calls}, flush=True)
"""


def twin_pair(arm: str) -> tuple[float, float, list[float]]:
    """One pair's median paired ratio, its rounds' spread (MAD of log-ratios), and each round's page faults per
    call (both processes)."""
    script = CHILD.format(
        root=str(ROOT), seed=str(ROOT / "kernelkiln/examples/seeds/row_softmax.py"), calls=CALLS, shim=shim_path()
    )
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
    mid = statistics.median(logs)
    return math.exp(mid), statistics.median(abs(v - mid) for v in logs), faults


def shim_path() -> str:
    """The shim, built once (kernelkiln's build cache)."""
    result = native.build(native.BuildRequest(source=SHIM, lang="c", flags=("-O2",)))
    if not result.ok or result.path is None:
        raise SystemExit(f"the stack shim did not build: {result.log.strip()[:300]}")
    return str(result.path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=16, help="pairs per arm (default 16)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    figures: dict[str, list[float]] = {arm: [] for arm in ARMS}
    faults: dict[str, list[float]] = {arm: [] for arm in ARMS}
    spreads: dict[str, list[float]] = {arm: [] for arm in ARMS}
    for k in range(args.pairs):
        for arm in figures:
            figure, spread, per_call = twin_pair(arm)
            figures[arm].append(figure)
            spreads[arm].append(spread)
            faults[arm].extend(per_call)
            print(f"pair {k + 1}/{args.pairs} {arm}: {figure:.3f}", file=sys.stderr, flush=True)
    report = {
        arm: {
            "figures": sorted(round(f, 4) for f in figs),
            "beyond_5pct": sum(abs(math.log(f)) > math.log(1.05) for f in figs),
            "round_spread_median": round(statistics.median(spreads[arm]), 5),
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
            f"{arm:9} beyond 5%: {r['beyond_5pct']}/{len(r['figures'])}  figures {r['figures'][0]:.3f}-"
            f"{r['figures'][-1]:.3f}  rounds' spread {r['round_spread_median']:.4f}  "
            f"rounds faulting: {r['rounds_faulting']}/{r['rounds']}"
        )


if __name__ == "__main__":
    main()
