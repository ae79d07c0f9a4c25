"""The demo as a new user runs it (`kiln optimize row_softmax`), analysed: what it re-tried after losing, and when
it reached its best.

    python benchmarks/demo_run.py [--python PY] [--repeat 3] [--budget 30] [--again] [--json]

--python runs another install's kiln (an earlier checkout's venv, for before/after figures side by side).
Per run: the search's best and the evaluation that first reached 95% of it; REVERTs; and *re-proposals*:
evaluations holding a knob value that had already lost three times (REVERT or REJECT) with no win
(KEEP or ACCEPT) while an untried setting without any such value remained — counted by the literal
rule, and by kernelkiln's rule (a loss must also sit below the median figure so far).
--again runs the demo a second time on each run's store, as a user who types `make demo` twice does, and
reports the evaluation at which the second run first tried the first run's result (its latest KEEP).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelkiln.memory.prior import contest
from kernelkiln.orchestrator.results import incumbent
from kernelkiln.store import open_store
from kernelkiln.task import knobs as K


def analyse(attempts: list, space: list[dict]) -> dict:
    figures = [a.speedup if a.correct and a.speedup else None for a in attempts]
    best = max((f for a, f in zip(attempts, figures, strict=True) if a.verdict == "KEEP" and f), default=0.0)
    result = incumbent(attempts)  # what the run returned, and what memory lends the next run of the task
    reached = next(
        (
            i + 1
            for i, (a, f) in enumerate(zip(attempts, figures, strict=True))
            if a.verdict == "KEEP" and f and f >= 0.95 * best
        ),
        None,
    )
    counts = {"literal": 0, "kernelkiln": 0}
    for i, attempt in enumerate(attempts):
        earlier = attempts[:i]
        tried = {K.key(a.case.knobs) for a in earlier if a.case.knobs}
        for rule in counts:
            aside = _aside(earlier, rule)
            free = [s for s in space if K.key(s) not in tried and not (K.values_of(s) & aside)]
            if free and attempt.case.knobs and K.values_of(attempt.case.knobs) & aside:
                counts[rule] += 1
    return {
        "best": best,
        "evaluations_to_95": reached,
        "reverts": sum(a.verdict == "REVERT" for a in attempts),
        "re_proposals": counts,
        "evaluations": len(attempts),
        "result_settings": result.case.knobs if result else None,
    }


def _aside(earlier: list, rule: str) -> frozenset:
    """Values set aside before the next evaluation: the literal rule counts every loss; kernelkiln's keeps a
    value whose loss once sat at or above the median figure."""
    outcomes = []
    for a in earlier:
        if a.case.knobs:
            lost = contest(a.verdict, a.case)
            figure = a.speedup if a.correct and a.speedup else None
            outcomes.append((a.case.knobs, lost, figure if rule == "kernelkiln" else (None if lost else figure)))
    return K.losing_values(outcomes, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--again", action="store_true", help="run each demo a second time on its store")
    args = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.repeat):
            store = f"sqlite:///{tmp}/demo-{k}.db"
            runs.append(_demo(args, store, f"{tmp}/out-{k}", k))
            print(f"run {k + 1}: { {n: v for n, v in runs[-1].items() if n != 'settings'} }", file=sys.stderr)
            if args.again:
                second = _demo(args, store, f"{tmp}/again-{k}", k)
                wanted = K.key(runs[-1]["result_settings"] or {})
                runs[-1]["again"] = {
                    "first_result_at": next(
                        (i + 1 for i, s in enumerate(second["settings"]) if s and K.key(s) == wanted), None
                    ),
                    "evaluations": second["evaluations"],
                }
                print(f"run {k + 1} again: {runs[-1]['again']}", file=sys.stderr)
    again = [r["again"]["first_result_at"] for r in runs if "again" in r]
    out = {
        "python": args.python,
        "budget": args.budget,
        "runs": [{k: v for k, v in r.items() if k != "settings"} for r in runs],
        "median_evaluations_to_95": statistics.median(r["evaluations_to_95"] or args.budget + 1 for r in runs),
        "re_proposals_literal": sum(r["re_proposals"]["literal"] for r in runs),
        "re_proposals_kernelkiln": sum(r["re_proposals"]["kernelkiln"] for r in runs),
        "again_first_result_at": again,
    }
    print(
        json.dumps(out, indent=2)
        if args.json
        else f"median evaluations to 95% of the run's best: {out['median_evaluations_to_95']}; "
        f"re-proposals after three losses: {out['re_proposals_literal']} (literal rule), "
        f"{out['re_proposals_kernelkiln']} (kernelkiln's)"
        + (f"; run again, the first run's result tried at evaluation {again}" if again else "")
    )


def _demo(args: argparse.Namespace, store: str, out: str, k: int) -> dict:
    """One `kiln optimize row_softmax` on ``store``, analysed."""
    done = subprocess.run(
        [
            args.python,
            "-m",
            "kernelkiln",
            "optimize",
            "row_softmax",
            "--budget",
            str(args.budget),
            "--store",
            store,
            "--out",
            out,
            "--json",
            "--set-config",
            f"policy.seed={k}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"kiln failed: {done.stderr.strip().splitlines()[-1]}")
    run_id = json.loads(done.stdout)["run_id"]
    opened = open_store(store)
    with opened.read() as conn:
        attempts = opened.attempts.for_run(conn, run_id)
    knobs = K.read_knobs(attempts[0].code)
    space = [
        dict(zip([kn.name for kn in knobs], c, strict=True)) for c in itertools.product(*(kn.options for kn in knobs))
    ]
    analysed = analyse(attempts, space)
    analysed["settings"] = [a.case.knobs for a in attempts]
    return analysed


if __name__ == "__main__":
    main()
