"""The value of each task's knob space: the best a long search finds over the generated seed, side by side.

    python benchmarks/space_value.py [SUITE] [--budget 40] [--tasks A,B] [--out DIR] [--json]

For every task of SUITE (default kb-cpu) whose seed the tuner can start from: the tuner
searches its knobs for --budget evaluations on a fresh store (no memory from other tasks),
then the best candidate is judged once more *against the generated seed as its incumbent*
with a longer timing budget (--confirm-budget), so the figure is a ratio measured side by
side in one timing session, not the search's maximum over noisy figures (which is biased
upward by the selection). A space whose best is within 5% of the seed has little for a
search, or a memory, to find.

Each task's line goes to DIR/space.jsonl as it finishes (the run continues where it stopped),
with every attempt's settings and figure, for the per-knob analysis (`--knobs`: for each
knob, the median figure of each of its values over the attempts that held it, per family).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelkiln.agents.config import TunerConfig
from kernelkiln.guard import GuardSession
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig, search_guard
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.orchestrator.starts import NoStart, starting_code
from kernelkiln.store import open_store
from kernelkiln.task import load_suite, load_task


def measure(path: Path, args, root: Path) -> dict:
    task = load_task(path)
    config = OptimizeConfig(
        budget=args.budget,
        confirm_time_budget_s=None,
        policy=TunerConfig(seed=args.seed),
        guard=search_guard(time_budget_s=args.time_budget, min_rounds=3, robustness_trials=0),
    )
    try:
        start_code, _ = starting_code(task, config)
    except NoStart as exc:
        return {"task": task.name, "status": "no seed", "reason": str(exc)}
    db = root / f"{task.name}.db"
    for stale in root.glob(f"{db.name}*"):
        stale.unlink()
    memory = Memory(open_store(f"sqlite:///{db.resolve()}"))
    started = time.perf_counter()
    result = Optimizer(memory, root).start([TaskSpec(str(path), {})], config, root / task.name)
    with memory.store.read() as conn:
        attempts = memory.store.attempts.for_run(conn, result.run_id)
    search_s = time.perf_counter() - started
    keeps = [a for a in attempts if a.verdict == "KEEP" and a.speedup]
    first = next((a for a in attempts if a.speedup), None)
    row = {
        "task": task.name,
        "family": task.op_family,
        "status": "ok",
        "evaluations": len(attempts),
        "search_s": round(search_s, 1),
        "seed_first": first.speedup if first else None,
        "search_best": keeps[-1].speedup if keeps else None,
        "attempts": [
            {"knobs": a.case.knobs, "verdict": a.verdict, "speedup": a.speedup, "move": a.case.move} for a in attempts
        ],
    }
    best = keeps[-1] if keeps else None
    if best is None or best.code == start_code:
        row["best_over_seed"] = 1.0
        return row
    guard = search_guard(time_budget_s=args.confirm_budget, isolation="best-effort")
    with GuardSession(task, guard) as session:
        verdict = session.evaluate(best.code, incumbent=start_code)
    row["best_over_seed"] = verdict.speedup_vs_incumbent if verdict.correct else None
    row["best_vs_reference"] = verdict.speedup if verdict.correct else None
    return row


def knob_table(rows: list[dict]) -> dict:
    """Per family and knob: each value's median figure over the attempts that held it (how much a knob moves)."""
    table: dict[str, dict[str, dict[str, list[float]]]] = {}
    for row in rows:
        for a in row.get("attempts", []):
            if not a["speedup"] or not a["knobs"]:
                continue
            for name, value in a["knobs"].items():
                family = table.setdefault(row["family"] or "unknown", {}).setdefault(name, {})
                family.setdefault(json.dumps(value), []).append(a["speedup"] / (row["seed_first"] or 1.0))
    return {
        fam: {name: {v: round(statistics.median(s), 3) for v, s in values.items()} for name, values in knobs.items()}
        for fam, knobs in table.items()
    }


def summary(rows: list[dict]) -> dict:
    ok = [r for r in rows if r.get("best_over_seed")]
    ratios = sorted(r["best_over_seed"] for r in ok)
    families: dict[str, list[float]] = {}
    for r in ok:
        families.setdefault(r["family"] or "unknown", []).append(r["best_over_seed"])

    def quartiles(values: list[float]) -> dict:
        q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        return {
            "n": len(values),
            "min": round(min(values), 3),
            "q1": round(q[0], 3),
            "median": round(q[1], 3),
            "q3": round(q[2], 3),
            "max": round(max(values), 3),
            "within_5pct": sum(v < 1.05 for v in values),
        }

    return {
        "tasks": len(rows),
        "measured": len(ok),
        "all": quartiles(ratios) if ratios else None,
        "families": {f: quartiles(v) for f, v in sorted(families.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", nargs="?", default="kb-cpu")
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--time-budget", type=float, default=0.3, help="timing budget of a search evaluation (s)")
    parser.add_argument("--confirm-budget", type=float, default=2.0, help="timing budget of best vs seed (s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", default=None, help="only these tasks, by name (A,B,...)")
    parser.add_argument("--out", type=Path, default=Path("kiln-space"))
    parser.add_argument("--knobs", action="store_true", help="add the per-family knob table")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ledger = args.out / "space.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []
    done = {r["task"] for r in rows}
    paths = load_suite(args.suite).task_paths()
    if args.tasks:
        wanted = set(args.tasks.split(","))
        paths = [p for p in paths if p.stem in wanted]
    for path in paths:
        if path.stem in done:
            continue
        row = measure(path, args, args.out)
        rows.append(row)
        with ledger.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"{row['task']}: {row['status']}, best over seed {row.get('best_over_seed')}", file=sys.stderr)
    out = summary([r for r in rows if r["task"] in {p.stem for p in paths}])
    if args.knobs:
        out["knobs"] = knob_table(rows)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{out['measured']} of {out['tasks']} tasks measured; best over seed (side by side):")
    for name, q in [("all", out["all"]), *out["families"].items()]:
        if q:
            print(
                f"  {name:14s} n={q['n']:2d}  min {q['min']:.2f}  q1 {q['q1']:.2f}  median {q['median']:.2f}  "
                f"q3 {q['q3']:.2f}  max {q['max']:.2f}  within 5%: {q['within_5pct']}"
            )


if __name__ == "__main__":
    main()
