"""How long the guard takes per small candidate, gate to verdict, build cache cold and warm.

    python benchmarks/guard_throughput.py [--candidates 5] [--task FILE --candidate FILE] [--json]

cold: a candidate whose native source was never built (compile included)
warm: the same candidates again, their binaries already in the build cache
Both are medians of end-to-end GuardSession.evaluate() calls in one process, measured
side by side against a fresh, temporary build cache, with the default GuardConfig. The
untimed figures are the same phases with evaluate(timed=False): gate, worker, build and
checks without the timing stage, whose length follows the machine's noise (it stops once
the speedup is precise), so a fixed cost per candidate (the sandbox's) shows in them best.
Start-up (fork-server with torch, the reference worker) is paid once per session and is
reported apart. The default small candidate is a C row softmax on a 2-workload task; a torch
extension in KernelBench's form (``load_inline``) is measured with

    python benchmarks/guard_throughput.py --task kernelkiln/testing/tasks/tiny_relu.py \
        --candidate kernelkiln/testing/candidates/relu_load_inline.py --candidates 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelkiln.guard import GuardConfig, GuardSession
from kernelkiln.task import load_task
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.tasks import TASKS


def variants(source: str, count: int) -> list[str]:
    """Copies of a candidate whose native sources differ (a comment before their first #include), so each compiles."""
    marker = "\n#include "
    if marker not in source:
        raise SystemExit("the candidate's native source must have an #include at the start of a line")
    return [source.replace(marker, f"\n/* variant {i} {time.time_ns()} */{marker}", 1) for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", type=int, default=5, help="distinct candidates per phase")
    parser.add_argument("--task", type=Path, default=TASKS / "tiny_softmax.py")
    parser.add_argument("--candidate", type=Path, default=CANDIDATES / "softmax_c.py")
    parser.add_argument("--platform", default="cpu", help="cpu or cuda (the candidate must suit it)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    cache = tempfile.mkdtemp(prefix="kiln-bench-cache-")
    os.environ["KILN_CACHE_DIR"] = cache
    try:
        sources = variants(args.candidate.read_text(), args.candidates)
        start = time.perf_counter()
        task = load_task(args.task)
        with GuardSession(task, GuardConfig(platform=args.platform)) as guard:
            guard.evaluate(variants(args.candidate.read_text(), 1)[0])  # fork-server + reference worker
            startup = time.perf_counter() - start
            times: dict[str, list[float]] = {"cold": [], "warm": [], "untimed_cold": [], "untimed_warm": []}
            verdicts = []
            for timed, prefix, batch in (
                (True, "", sources),
                (False, "untimed_", variants(args.candidate.read_text(), args.candidates)),
            ):
                for phase in ("cold", "warm"):
                    for source in batch:
                        t0 = time.perf_counter()
                        verdict = guard.evaluate(source, timed=timed)
                        times[prefix + phase].append(time.perf_counter() - t0)
                        verdicts.append(verdict.verdict)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    result = {
        "per_candidate_s_cold": round(statistics.median(times["cold"]), 4),
        "per_candidate_s_warm": round(statistics.median(times["warm"]), 4),
        "untimed_s_cold": round(statistics.median(times["untimed_cold"]), 4),
        "untimed_s_warm": round(statistics.median(times["untimed_warm"]), 4),
        "startup_s": round(startup, 3),
        "candidates": args.candidates,
        "task": task.name,
        "workloads": len(task.workloads),
        "verdicts": sorted(set(verdicts)),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"guard throughput on {task.name} ({len(task.workloads)} workloads, {args.candidates} candidates):")
        print(f"  cold build cache: {result['per_candidate_s_cold']:.3f} s per candidate (median)")
        print(f"  warm build cache: {result['per_candidate_s_warm']:.3f} s per candidate (median)")
        print(
            f"  untimed (gate, build, checks): {result['untimed_s_cold']:.3f} s cold, "
            f"{result['untimed_s_warm']:.3f} s warm"
        )
        print(f"  one-time start-up: {result['startup_s']:.2f} s; verdicts seen: {', '.join(result['verdicts'])}")


if __name__ == "__main__":
    main()
