"""What replicated verdicts cost: the same sequence of judgements under each `guard.replicate` setting.

    python benchmarks/replicate_cost.py extract STORE_URL [--out benchmarks/data/replicate-sequences.json]
    python benchmarks/replicate_cost.py run [--repeats 2] [--arms none,every,within] [--log PATH] [--json]

`extract` keeps, per task of a finished `kiln optimize` run, each evaluated candidate in order with the
incumbent it was judged against (the last KEEP's code; none before the first). `run` judges those
sequences again, one fresh GuardSession per task and arm, arms interleaved within each repeat (the
machine's speed drifts): so every arm sees the same candidates against the same incumbents, which a
second tuner run would not (its path follows its verdicts). Arms:
  none     guard.replicate = "none"
  every    every KEEP or REVERT replicated (replicate_within huge)
  within   the defaults (decisions within replicate_within, replicated for replicate_rounds rounds)
Each (repeat, arm, task) row is appended to --log at once and skipped when a rerun finds it (resumable).
Figures: per arm, the wall time of all its judgements over the "none" arm's, per repeat and pooled, how
many verdicts were replicated, and how many verdicts differ from the "none" arm's; and, paired within
each arm (free of the noise between arms), its replicates' seconds over its first judgements'. Guard time only: a
`kiln optimize` run also builds, proposes and confirms, so its overhead share is smaller than this.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelkiln.guard import GuardConfig, GuardSession
from kernelkiln.task import load_task

ROOT = Path(__file__).resolve().parents[1]
SEQUENCES = ROOT / "benchmarks" / "data" / "replicate-sequences.json"
LOG = ROOT / "benchmarks" / "figures" / "replicate-cost.jsonl"
ARMS = {
    "none": {"replicate": "none"},
    "every": {"replicate": "decisions", "replicate_within": 1e9},
    "within": {},
}


def extract(store: str) -> dict[str, Any]:
    """Per task: its file and the (candidate, incumbent) pairs in the order the run judged them."""
    from sqlalchemy import create_engine, text

    engine = create_engine(store)
    out: dict[str, Any] = {}
    with engine.connect() as db:
        tasks = {row.id: json.loads(row.meta)["path"] for row in db.execute(text("select id, meta from tasks"))}
        for task_id, path in tasks.items():
            rows = db.execute(
                text("select code, verdict from attempts where task_id = :t order by created_at"), {"t": task_id}
            )
            steps, incumbent = [], None
            for row in rows:
                steps.append({"source": row.code, "incumbent": incumbent})
                if row.verdict == "KEEP":
                    incumbent = row.code
            out[task_id] = {"path": str(Path(path).resolve().relative_to(ROOT)), "steps": steps}
    return out


class _Clocked(GuardSession):
    """A session that keeps how long each judgement took: an evaluation's first, then its replicate's."""

    spent: list[float]

    def _judge(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return super()._judge(*args, **kwargs)
        finally:
            self.spent.append(time.perf_counter() - start)


def judge(task_path: str, steps: list[dict[str, Any]], arm: str) -> dict[str, Any]:
    """One arm over one task's sequence: wall seconds, the first judgements' and the replicates' seconds,
    verdicts, and how many were replicated."""
    task = load_task(ROOT / task_path)
    verdicts, replicated, first_s, replicate_s = [], 0, 0.0, 0.0
    start = time.perf_counter()
    with _Clocked(task, GuardConfig(**ARMS[arm])) as guard:
        for step in steps:
            guard.spent = []
            v = guard.evaluate(step["source"], step["incumbent"])
            first_s += guard.spent[0]
            replicate_s += sum(guard.spent[1:])
            verdicts.append(v.verdict)
            replicated += len(guard.spent) > 1
    return {
        "seconds": time.perf_counter() - start,
        "first_s": first_s,
        "replicate_s": replicate_s,
        "verdicts": verdicts,
        "replicated": replicated,
    }


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def run(sequences: dict[str, Any], arms: list[str], repeats: int, log: Path, tag: str) -> None:
    done = {(r["repeat"], r["arm"], r["task"]) for r in read_log(log) if r["tag"] == tag}
    log.parent.mkdir(parents=True, exist_ok=True)
    for repeat in range(repeats):
        for task_id, seq in sequences.items():
            # Rotate the arms' order each repeat: no arm always runs first on a warming machine.
            for arm in arms[repeat % len(arms) :] + arms[: repeat % len(arms)]:
                if (repeat, arm, task_id) in done:
                    continue
                row = {"tag": tag, "repeat": repeat, "arm": arm, "task": task_id}
                row |= judge(seq["path"], seq["steps"], arm)
                with log.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
                seconds, replicated = row["seconds"], row["replicated"]
                print(
                    f"repeat {repeat} {task_id:10} {arm:8} {seconds:6.1f} s, {replicated} replicated", file=sys.stderr
                )


def summarise(rows: list[dict[str, Any]], arms: list[str]) -> dict[str, Any]:
    """Per arm: wall over the none arm's per repeat (tasks summed), replicated count, verdicts that differ."""
    by: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["repeat"], r["arm"]), []).append(r)
    repeats = sorted({rep for rep, arm in by if arm == "none"})
    out: dict[str, Any] = {}
    for arm in arms:
        ratios, replicated, differ, judged, first_s, replicate_s = [], 0, 0, 0, 0.0, 0.0
        for rep in repeats:
            mine, base = by.get((rep, arm), []), {r["task"]: r for r in by.get((rep, "none"), [])}
            mine = [r for r in mine if r["task"] in base]
            if not mine:
                continue
            ratios.append(sum(r["seconds"] for r in mine) / sum(base[r["task"]]["seconds"] for r in mine))
            for r in mine:
                replicated += r["replicated"]
                first_s += r.get("first_s", 0.0)
                replicate_s += r.get("replicate_s", 0.0)
                judged += len(r["verdicts"])
                differ += sum(a != b for a, b in zip(r["verdicts"], base[r["task"]]["verdicts"], strict=False))
        out[arm] = {
            "over_none": statistics.fmean(ratios) if ratios else None,
            "per_repeat": [round(x, 3) for x in ratios],
            # Paired within the arm, free of the between-arm noise: the replicates' time over the first judgements'.
            "replicates_over_first": replicate_s / first_s if first_s else None,
            "judged": judged,
            "replicated": replicated,
            "verdicts_unlike_none": differ,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("extract")
    ex.add_argument("store")
    ex.add_argument("--out", type=Path, default=SEQUENCES)
    rn = sub.add_parser("run")
    rn.add_argument("--sequences", type=Path, default=SEQUENCES)
    rn.add_argument("--repeats", type=int, default=2)
    rn.add_argument("--arms", default="none,within,every")
    rn.add_argument("--log", type=Path, default=LOG)
    rn.add_argument("--tag", help="series to add to and summarise (default: the git commit)")
    rn.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.command == "extract":
        args.out.write_text(json.dumps(extract(args.store), indent=1) + "\n")
        print(f"wrote {args.out}", file=sys.stderr)
        return
    tag = (
        args.tag
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    )
    arms = args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown or "none" not in arms:
        sys.exit(f"--arms: {', '.join(unknown) or 'none is missing'} (known: {', '.join(ARMS)}; none is the baseline)")
    run(json.loads(args.sequences.read_text()), arms, args.repeats, args.log, tag)
    summary = summarise([r for r in read_log(args.log) if r["tag"] == tag], arms)
    if args.json:
        print(json.dumps(summary, indent=1))
        return
    head = ("arm", "wall over none", "per repeat", "replicates/first", "replicated", "unlike none")
    print(f"{head[0]:10} {head[1]:>15} {head[2]:>20} {head[3]:>17} {head[4]:>11} {head[5]:>12}")
    for arm, s in summary.items():
        over = f"{s['over_none']:.3f}" if s["over_none"] is not None else "-"
        paired = f"{s['replicates_over_first']:.3f}" if s["replicates_over_first"] is not None else "-"
        replicated = f"{s['replicated']}/{s['judged']}"
        unlike, repeats = s["verdicts_unlike_none"], s["per_repeat"]
        print(f"{arm:10} {over:>15} {repeats!s:>20} {paired:>17} {replicated:>11} {unlike:>12}")


if __name__ == "__main__":
    main()
