"""How many of a suite's tasks get a generated seed the guard judges correct (`kiln seed --check`).

    python benchmarks/seed_coverage.py [SUITE] [--json]

For every task of SUITE (default: kb-cpu): generate the candidate from the reference's
operations and judge it with the guard (gate, build, check on every workload, robustness
trials included; no timing). A task whose reference kernelkiln cannot lower
is counted apart, with the operations named.

coverage:      correct / lowerable tasks
correct:       tasks whose generated seed the guard judged correct
wrong:         tasks whose seed was generated but judged wrong (each is a lowering bug)
unsupported:   tasks refused, with the reason
kinds:         loop-nest kinds per task (row, column, scan, window, gemm) and the loop nests' count
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelkiln.guard import GuardConfig, GuardSession
from kernelkiln.lowering import Unsupported, generate
from kernelkiln.task import load_suite, load_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", nargs="?", default="kb-cpu")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    results: dict[str, dict] = {}
    started = time.perf_counter()
    for path in load_suite(args.suite).task_paths():
        task = load_task(path)
        try:
            generated = generate(task)
        except Unsupported as exc:
            results[task.name] = {"status": "unsupported", "reason": str(exc)}
            print(f"{task.name}: unsupported: {exc}", file=sys.stderr)
            continue
        with GuardSession(task, GuardConfig(isolation="best-effort")) as session:
            verdict = session.evaluate(generated.source, timed=False)
        status = "correct" if verdict.correct else "wrong"
        results[task.name] = {
            "status": status,
            "kinds": list(generated.kinds),
            "kernels": generated.fused,
            **({} if verdict.correct else {"reason": verdict.reason}),
        }
        print(
            f"{task.name}: {status} ({generated.fused} loop nest(s): {', '.join(generated.kinds)})"
            + ("" if verdict.correct else f": {verdict.reason}"),
            file=sys.stderr,
        )
    counts = {s: sum(r["status"] == s for r in results.values()) for s in ("correct", "wrong", "unsupported")}
    lowerable = counts["correct"] + counts["wrong"]
    out = {
        "suite": args.suite,
        "tasks": len(results),
        **counts,
        "coverage": counts["correct"] / lowerable if lowerable else None,
        "seconds": round(time.perf_counter() - started, 1),
        "per_task": results,
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(
            f"{args.suite}: {counts['correct']}/{lowerable} generated seeds correct "
            f"({out['coverage']:.0%}); {counts['unsupported']} tasks not lowerable yet"
        )


if __name__ == "__main__":
    main()
