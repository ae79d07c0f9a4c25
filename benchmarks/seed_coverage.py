"""How many of a suite's tasks get a generated seed the guard judges correct (`kiln seed --check`).

    python benchmarks/seed_coverage.py [SUITE] [--timed SECONDS] [--threads T] [--json]

For every task of SUITE (default: kb-cpu): generate the candidate from the reference's
operations and judge it with the guard (gate, build, check on every workload, robustness
trials included; no timing). A task whose reference kernelkiln cannot lower
is counted apart, with the operations named.

coverage:      correct / lowerable tasks
correct:       tasks whose generated seed the guard judged correct
wrong:         tasks whose seed was generated but judged wrong (each is a lowering bug)
unsupported:   tasks refused, with the reason
kinds:         loop-nest kinds per task (row, column, scan, window, gemm) and the loop nests' count

With --timed S each correct seed is also timed against torch eager by the guard (reference and
seed interleaved in one session, at most S seconds of timing per task): per task its speedup
and where seed and eager stand against the roofline (`kiln machine`'s peaks; FLOPs and bytes from
the task's KILN or derived from its reference, kernelkiln.task.roofline): the bounding term, the
rate reached on it and its fraction of the peak; over the suite the geometric mean speedup, the
seeds below 1.0x and 0.95x of eager, and the median fraction of memory- and compute-bound tasks.
The ceiling is the speedup over eager a kernel running at its bound would have (1 / eager's fraction);
its geometric mean over the suite is the most any speedup target over eager can ask of this machine.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelkiln.guard import GuardConfig, GuardSession
from kernelkiln.lowering import Unsupported, generate
from kernelkiln.platforms.host import default_threads
from kernelkiln.platforms.sol import achieved, over_workloads
from kernelkiln.task import load_suite, load_task


def roofline(task, verdict, peaks) -> dict:
    """Seed and eager against the roofline, geometric means over the workloads (empty when unknown)."""
    by_name = {w.name: w for w in task.workloads}
    workloads = [(by_name[r.name], r) for r in verdict.workloads]
    seed = over_workloads([achieved(w.flops, w.bytes, r.t_cand_s, peaks) for w, r in workloads])
    eager = over_workloads([achieved(w.flops, w.bytes, r.t_ref_s, peaks) for w, r in workloads])
    if seed is None or eager is None:
        return {}
    return {
        "bound": seed.bound,
        "rate": round(seed.rate, 2),
        "unit": seed.unit,
        "sol_seed": round(seed.fraction, 3),
        "sol_eager": round(eager.fraction, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", nargs="?", default="kb-cpu")
    parser.add_argument("--timed", type=float, default=0.0, metavar="S", help="also time each correct seed (S s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--threads", type=int, default=None, metavar="T", help="threads for seed and eager (default: the guard's)"
    )
    args = parser.parse_args()
    results: dict[str, dict] = {}
    started = time.perf_counter()
    for path in load_suite(args.suite).task_paths():
        task = load_task(path)
        try:
            generated = generate(task, threads=args.threads)
        except Unsupported as exc:
            results[task.name] = {"status": "unsupported", "reason": str(exc)}
            print(f"{task.name}: unsupported: {exc}", file=sys.stderr)
            continue
        config = GuardConfig(isolation="best-effort", **({"threads": args.threads} if args.threads else {}))
        with GuardSession(task, config) as session:
            timed = args.timed > 0
            verdict = session.evaluate(generated.source, timed=timed, time_budget_s=args.timed if timed else None)
            peaks = session.peaks
        status = "correct" if verdict.correct else "wrong"
        speedup = verdict.speedup if verdict.correct and verdict.timed else None
        results[task.name] = {
            "status": status,
            "kinds": list(generated.kinds),
            "kernels": generated.fused,
            **({} if verdict.correct else {"reason": verdict.reason}),
            **({"speedup": round(speedup, 3), **roofline(task, verdict, peaks)} if speedup else {}),
        }
        roof = results[task.name]
        print(
            f"{task.name}: {status} ({generated.fused} loop nest(s): {', '.join(generated.kinds)})"
            + (f", {speedup:.2f}x over eager" if speedup else "")
            + (
                f", {roof['bound']}-bound: {roof['rate']:.1f} {roof['unit']}, {roof['sol_seed']:.0%} of peak "
                f"(eager {roof['sol_eager']:.0%})"
                if "bound" in roof
                else ""
            )
            + ("" if verdict.correct else f": {verdict.reason}"),
            file=sys.stderr,
        )
    counts = {s: sum(r["status"] == s for r in results.values()) for s in ("correct", "wrong", "unsupported")}
    lowerable = counts["correct"] + counts["wrong"]
    out = {
        "suite": args.suite,
        "threads": args.threads or default_threads(),
        "tasks": len(results),
        **counts,
        "coverage": counts["correct"] / lowerable if lowerable else None,
        "seconds": round(time.perf_counter() - started, 1),
        "per_task": results,
    }
    speedups = {name: r["speedup"] for name, r in results.items() if r.get("speedup")}
    if speedups:
        out["geomean_speedup_eager"] = round(math.exp(statistics.fmean(map(math.log, speedups.values()))), 3)
        out["below_1"] = sorted(name for name, x in speedups.items() if x < 1.0)
        out["below_0.95"] = sorted(name for name, x in speedups.items() if x < 0.95)
        ceilings = [1 / r["sol_eager"] for r in results.values() if r.get("sol_eager")]
        if ceilings:  # each task at 100% of its roofline bound, over eager's measured time
            out["geomean_ceiling_eager"] = round(math.exp(statistics.fmean(map(math.log, ceilings))), 3)
        for bound in ("memory", "compute"):
            rows = [r for r in results.values() if r.get("bound") == bound]
            if rows:
                out[f"median_sol_{bound}"] = {
                    "tasks": len(rows),
                    "seed": round(statistics.median(r["sol_seed"] for r in rows), 3),
                    "eager": round(statistics.median(r["sol_eager"] for r in rows), 3),
                }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(
            f"{args.suite}: {counts['correct']}/{lowerable} generated seeds correct "
            f"({out['coverage']:.0%}); {counts['unsupported']} tasks not lowerable yet"
        )
        if speedups:
            print(
                f"seeds over eager: geometric mean {out['geomean_speedup_eager']:.2f}x over {len(speedups)} tasks; "
                f"below 1.0x: {', '.join(out['below_1']) or 'none'}; "
                f"below 0.95x: {', '.join(out['below_0.95']) or 'none'}"
            )
        if "geomean_ceiling_eager" in out:
            print(
                f"roofline ceiling over eager (every task at 100% of its bound): geometric mean "
                f"{out['geomean_ceiling_eager']:.2f}x; the seeds reach {out['geomean_speedup_eager']:.2f}x"
            )
        for bound in ("memory", "compute"):
            if f"median_sol_{bound}" in out:
                m = out[f"median_sol_{bound}"]
                print(
                    f"{bound}-bound tasks ({m['tasks']}): median {m['seed']:.0%} of the peak at the seed, "
                    f"{m['eager']:.0%} for eager"
                )


if __name__ == "__main__":
    main()
