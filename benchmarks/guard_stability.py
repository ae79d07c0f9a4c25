"""How repeatable the guard's numbers are, and whether noise can pass for a win.

    python benchmarks/guard_stability.py [--trials 10] [--task FILE --candidate FILE] [--json]

speedup_cv:     coefficient of variation of the speedup over the reference across
                --trials evaluations of the same candidate (default GuardConfig)
identical_keep: how many of --trials evaluations of a candidate against an identical
                incumbent were KEEP (each should be ACCEPT: no real difference)
All evaluations run in one process and one GuardSession, interleaved with nothing else.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelkiln.guard import GuardConfig, GuardSession
from kernelkiln.task import load_task
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.tasks import TASKS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--task", type=Path, default=TASKS / "tiny_softmax.py")
    parser.add_argument("--candidate", type=Path, default=CANDIDATES / "softmax_c.py")
    parser.add_argument("--platform", default="cpu", help="cpu or cuda (the candidate must suit it)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    task = load_task(args.task)
    source = args.candidate.read_text()
    with GuardSession(task, GuardConfig(platform=args.platform)) as guard:
        guard.evaluate(source)  # warm: fork-server, reference worker, build cache
        speedups = []
        for _ in range(args.trials):
            verdict = guard.evaluate(source)
            if verdict.speedup is None:
                raise SystemExit(f"the candidate was rejected: {verdict.reason}")
            speedups.append(verdict.speedup)
        identical = [guard.evaluate(source, incumbent=source) for _ in range(args.trials)]
    counts = Counter(v.verdict for v in identical)
    vs_inc = [v.speedup_vs_incumbent for v in identical if v.speedup_vs_incumbent is not None]
    result = {
        "speedup_cv": round(statistics.stdev(speedups) / statistics.mean(speedups), 4),
        "identical_keep": counts.get("KEEP", 0),
        "trials": args.trials,
        "speedup_mean": round(statistics.mean(speedups), 4),
        "speedups": [round(s, 4) for s in speedups],
        "identical_verdicts": dict(counts),
        "identical_ratio_range": [round(min(vs_inc), 4), round(max(vs_inc), 4)] if vs_inc else None,
        "task": task.name,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"guard stability on {task.name}, {args.trials} trials each:")
        print(f"  speedup over the reference: mean {result['speedup_mean']:.3f}x, CV {result['speedup_cv']:.1%}")
        print(f"  identical candidate vs incumbent: {dict(counts)}; ratio range {result['identical_ratio_range']}")


if __name__ == "__main__":
    main()
