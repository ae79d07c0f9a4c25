"""KernelBench's own metrics over its files: fast_0, fast_1 and fast_2 per level, over eager and torch.compile.

    python benchmarks/kernelbench_fast_p.py KernelBench/ [--shrink 8] [--budget 30] [--every 1]
        [--results benchmarks/data/kernelbench-fast-p.jsonl] [--json benchmarks/figures/kernelbench-fast-p.json]

Each file runs as its own `kiln bench` (the offline tuner at --budget evaluations, the best
confirmed by a longer timing, torch.compile timed against eager beforehand) in a folder of
its own, one file at a time: the guard's timings need the machine to themselves. Every
outcome is appended to --results as one JSON line as soon as it is known, so a sweep that
stops (a session ends, the machine changes) resumes where it stopped: files already
recorded there at the same --shrink and --budget are not run again (unless --again: then the
newest row of a file is the one counted). --same-sizes runs each file at the sizes its newest
row at this --shrink chose, whatever its budget (a budget-30 run of files a budget-1 run
measured compares the same workloads). --every K runs every
K-th file of each level (a sample; the summary gives a 95% interval for each rate).

fast_p is KernelBench's: the fraction of files whose candidate the guard judged correct
and faster than the baseline by more than p (fast_0 is the correct rate). Over
torch.compile, a file where torch.compile failed is left out of the denominator and counted.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernelbench_files import kiln, task_files
from provenance import provenance

FAST = (0.0, 1.0, 2.0)
# one change in a row's sizes, ``NAME BEFORE→AFTER``; a value may be a tuple, ``(4096, 1024)``
_SIZE = re.compile(r"(\w+) (?:.+?)→(.+?)(?=, [A-Za-z_]\w* |\s\(sizes /|$)")


def run_one(path: Path, shrink: str, budget: int, timeout: float, sizes: str | None = None) -> dict:
    """One file's outcome under `kiln bench`: whether it was judged correct and its speedups. ``sizes`` (an
    earlier row's, ``batch_size 128→45, ...``) runs it at those sizes instead of choosing them again."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "task"
        folder.mkdir()
        shutil.copy(path, folder / path.name)
        args = ["bench", str(folder), "--budget", str(budget), "--json", "--out", str(Path(tmp) / "out")]
        if sizes is not None:
            args += [f"--set={name}={after}" for name, after in _SIZE.findall(sizes)]
        proc, seconds = kiln(args, "" if sizes is not None else shrink, timeout)
    if proc is None:
        return {"status": "timeout", "reason": f"over {timeout:.0f} s", "seconds": seconds}
    if proc.returncode != 0 or not proc.stdout.strip():
        errors = [line for line in proc.stderr.splitlines() if line.startswith("kiln: error:")]
        last = (errors or proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {
            "status": "refused" if errors else "crashed",
            "reason": last.replace(str(folder) + "/", ""),
            "seconds": seconds,
        }
    bench = json.loads(proc.stdout)
    if not bench["repeats"][0]["tasks"]:
        return {"status": "refused", "reason": next(iter(bench["skipped"].values()), "skipped"), "seconds": seconds}
    figures = next(iter(bench["repeats"][0]["tasks"].values()))
    # evaluations the guard judged correct but could not measure (two figures in fresh processes that did not
    # replicate): a row with no speedup and these is a candidate the run could not confirm, not a tie
    unmeasured = sum(1 for line in proc.stderr.splitlines() if "(not measured" in line)
    # --shrink TIME chooses its factor by timing the reference: keep the sizes it chose
    chosen = [line.split(": ", 2)[-1] for line in proc.stderr.splitlines() if line.startswith("kiln: --shrink")]
    return {
        "status": "run",
        "sizes": sizes if sizes is not None else chosen[0] if chosen else None,
        "correct": bool(figures["correct"]),
        "speedup_eager": figures["best_speedup"],
        "speedup_compile": figures["speedup_compile"],
        "compile_ratio": figures["compile_ratio"],
        "compile_note": next(iter(bench["compile_notes"].values()), None),
        "evaluations": figures["evaluations"],
        "not_measured": unmeasured,
        "seconds": seconds,
    }


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson interval of a rate of ``hits`` in ``n``."""
    if n == 0:
        return (0.0, 1.0)
    p = hits / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, (centre - half) / (1 + z * z / n)), min(1.0, (centre + half) / (1 + z * z / n)))


def summarize(rows: list[dict]) -> dict:
    """Per level: files, fast_p over eager and over torch.compile (each with its interval), and the wall time."""
    levels: dict[str, list[dict]] = {}
    for row in rows:
        levels.setdefault(row["file"].split("/")[0], []).append(row)
    out = {}
    for level, items in sorted(levels.items()):
        compiled = [r for r in items if r.get("compile_ratio")]
        entry: dict = {"files": len(items), "seconds": round(sum(r["seconds"] for r in items))}
        for base, pool, key in (("eager", items, "speedup_eager"), ("compile", compiled, "speedup_compile")):
            for p in FAST:
                hits = sum(1 for r in pool if r.get("correct") and (p == 0 or (r.get(key) or 0) > p))
                low, high = wilson(hits, len(pool))
                entry[f"fast_{p:g}_{base}"] = {
                    "rate": hits / len(pool) if pool else None,
                    "of": len(pool),
                    "interval": [round(low, 3), round(high, 3)],
                }
        entry["compile_failed"] = len(items) - len(compiled)
        # no speedup, and some evaluation was not measured (rows before this field record nothing either way)
        entry["unconfirmed"] = sorted(
            r["file"] for r in items if r.get("speedup_eager") is None and r.get("not_measured", 0) > 0
        )
        entry["not_run"] = {r["file"]: r.get("reason", "") for r in items if r["status"] != "run"}
        out[level] = entry
    return out


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.0%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="KernelBench's KernelBench/ folder, or a folder of task files")
    parser.add_argument("--shrink", default="8", metavar="K|TIME", help="a factor (8) or a time target (20ms)")
    parser.add_argument("--budget", type=int, default=30, metavar="N", help="evaluations per file (kiln's default, 30)")
    parser.add_argument(
        "--every", type=int, default=1, metavar="K", help="every K-th file of each level (default 1: all)"
    )
    parser.add_argument("--levels", default="1,2,3", help="levelN subfolders to run (default 1,2,3)")
    parser.add_argument("--only", default="", help="run only files whose name contains one of these (a,b,c)")
    parser.add_argument("--timeout", type=float, default=1800.0, metavar="S", help="per file (default 1800)")
    parser.add_argument(
        "--results",
        type=Path,
        default=Path("benchmarks/data/kernelbench-fast-p.jsonl"),
        help="append each file's outcome here; files already there are not run again",
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the summary here")
    parser.add_argument(
        "--no-run", action="store_true", help="run nothing: summarize the chosen files --results already holds"
    )
    parser.add_argument(
        "--again",
        action="store_true",
        help="run the chosen files even where --results holds them (after a change): the newest row counts",
    )
    parser.add_argument(
        "--same-sizes",
        action="store_true",
        help="run each file at the sizes its newest row at this --shrink records, at any --budget, so two runs "
        "compare the same workload (--shrink TIME chooses by timing the reference, and two runs may choose "
        "differently)",
    )
    args = parser.parse_args()
    if not args.root.is_dir():
        parser.error(f"{args.root}: not a folder")
    if args.every < 1:
        parser.error("--every must be at least 1")
    files = task_files(args.root, args.levels, args.only)
    by_level: dict[str, list[Path]] = {}
    for p in files:
        by_level.setdefault(p.parent.name, []).append(p)
    chosen = [p for level in by_level.values() for p in level[:: args.every]]
    if not chosen:
        parser.error(f"{args.root}: no task files")
    setting = {"shrink": args.shrink, "budget": args.budget}
    done: dict[str, dict] = {}
    sized: dict[str, str] = {}  # each file's newest sizes at this --shrink, at any budget
    if args.results.exists():
        for line in args.results.read_text().splitlines():
            row = json.loads(line)
            if {k: row.get(k) for k in setting} == setting:
                done[row["file"]] = row
            if row.get("shrink") == args.shrink and row.get("sizes"):
                sized[row["file"]] = row["sizes"]
    keys = [f"{p.parent.name}/{p.name}" for p in chosen]
    todo = [] if args.no_run else [(p, k) for p, k in zip(chosen, keys, strict=True) if args.again or k not in done]
    print(
        f"{len(chosen)} files chosen, {len(chosen) - len(todo)} already in {args.results}, {len(todo)} to run",
        file=sys.stderr,
    )
    pinned = {k: sized[k] for _, k in todo if args.same_sizes and k in sized}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    where = provenance()
    for n, (path, key) in enumerate(todo, 1):
        row = {
            "file": key,
            **setting,
            **run_one(path, args.shrink, args.budget, args.timeout, pinned.get(key)),
            "commit": where["commit"],
            "machine": where["machine"],
        }
        with args.results.open("a") as out:
            out.write(json.dumps(row, sort_keys=True) + "\n")
        done[key] = row
        shown = (
            f"correct={row['correct']} eager {row['speedup_eager']} compile {row['speedup_compile']}"
            if row["status"] == "run"
            else f"{row['status']}: {row['reason']}"
        )
        print(f"[{n}/{len(todo)}] {key}: {shown} ({row['seconds']:.0f} s)", file=sys.stderr, flush=True)
    recorded = [done[k] for k in keys if k in done]
    if not recorded:
        sys.exit(f"{args.results} holds none of the {len(keys)} files chosen at these settings: nothing to summarize")
    if len(recorded) < len(keys):
        print(
            f"{len(recorded)} of the {len(keys)} files chosen are recorded: the summary covers those", file=sys.stderr
        )
    summary = summarize(recorded)
    print(f"{'level':<8} {'files':>5} {'fast_0':>7} {'fast_1':>7} {'fast_2':>7} {'fast_1/compile':>15} {'hours':>6}")
    for level, e in summary.items():
        rates = [_percent(e[f"fast_{p}"]["rate"]) for p in ("0_eager", "1_eager", "2_eager", "1_compile")]
        hours = e["seconds"] / 3600
        print(f"{level:<8} {e['files']:>5} {rates[0]:>7} {rates[1]:>7} {rates[2]:>7} {rates[3]:>15} {hours:>6.2f}")
    if args.json:
        commits = dict(sorted(collections.Counter(r["commit"] for r in recorded).items()))
        record = {
            "provenance": where,
            **setting,
            "every": args.every,
            "files": len(recorded),
            "commits": commits,  # the commit each row was measured at, and how many rows
            "levels": summary,
        }
        args.json.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
