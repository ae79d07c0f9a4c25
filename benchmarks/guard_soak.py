"""Soak test of the guard's noise band: how often does a busy machine make it say the wrong thing?

    python benchmarks/guard_soak.py [--trials 30] [--conditions quiet,cpu1,...] [--out PATH] [--tag T] [--json]
    python benchmarks/guard_soak.py --summary-only [--out PATH] [--tag T] [--json]

Three pairs, each judged --trials times (against an incumbent) under each condition, on one
workload of the bundled row_softmax (its first, 256 x 1024) with the default GuardConfig:
  identical  the good row_softmax candidate against itself: ACCEPT is right; KEEP or REVERT is false
  faster     that candidate against a slower version of itself (the same kernel, plus the kernel run
             again on 25% of the rows into a scratch output, about 1.3x slower): KEEP is right
  slower     the reverse, slower candidate against faster incumbent: REVERT is right
Conditions (each hog a subprocess that ends by itself, and is killed when its block ends):
  quiet         nothing else running
  cpu1/2/3      1, 2 or 3 busy-loop processes per core
  membw         one STREAM-like copy loop per core over two arrays of max(256 MiB, 8 x last-level cache)
  intermittent  one busy loop per core, on for 0.2-0.5 s and off for 0.2-0.5 s at random
  jobs          kernelkiln beside its own work: two other guards judging the bundled row_softmax's seed
                in a loop (workers, compiles, checks) and one busy loop, at once
Work runs trial by trial, then condition, then pair; every judgement is appended at once to --out
(JSON lines), and judgements already there under the same --tag (default: the git commit) are skipped,
so an interrupted run resumes and every cell holds about as many judgements as the others.

Figures per condition and pair (from --out, this --tag only):
  n              judgements; KEEP/ACCEPT/REVERT/REJECT: how many of each verdict
  false_keep     share of n that was KEEP where it is wrong (identical, slower)
  false_revert   share of n that was REVERT where it is wrong (identical, faster)
  missed         share of the measured faster/slower judgements whose verdict was not the right one
  not_measured   share of n where the guard said it could not measure (an "unmeasured" verdict, or an
                 ACCEPT at stage "time" that was not timed)
  cv, median     coefficient of variation and median of speedup_vs_incumbent over measured verdicts
Per condition: the same counts over its pairs; top line: false KEEPs and REVERTs over everything.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelkiln.guard import GuardConfig, GuardSession
from kernelkiln.guard.verdict import Verdict
from kernelkiln.platforms.host import last_level_cache_bytes
from kernelkiln.platforms.machine import cpu_name
from kernelkiln.task import Task, knobs, load_task

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "kernelkiln" / "examples" / "row_softmax.py"
SEED = ROOT / "kernelkiln" / "examples" / "seeds" / "row_softmax.py"
GOOD = {"FLAGS": ["-O3", "-march=native", "-ffast-math"], "ACCUMULATORS": 4}
CALL = "lib.softmax_rows(x, y, x.shape[0], x.shape[1])"
EXTRA_SHARE = 0.25  # of the rows the slow version softmaxes a second time
CONDITIONS = ("quiet", "cpu1", "cpu2", "cpu3", "membw", "intermittent", "jobs")
PAIRS = ("identical", "faster", "slower")
RIGHT = {"identical": "ACCEPT", "faster": "KEEP", "slower": "REVERT"}
WARMUP_S = 0.5
JOBS_WARMUP_S = 5.0  # a job imports torch and starts its reference worker before it loads the machine
HOG_LIMIT_S = 180.0  # per pair in a block: a hog outlives a dead benchmark by at most this much

BUSY = "import time\nwhile time.time() < {end}:\n    pass\n"
BLINK = (
    "import random, time\nwhile time.time() < {end}:\n    stop = time.time() + random.uniform(0.2, 0.5)\n"
    "    while time.time() < min(stop, {end}):\n        pass\n    time.sleep(random.uniform(0.2, 0.5))\n"
)
JOB = (
    "import signal, sys, time\nsys.path.insert(0, {root!r})\nfrom pathlib import Path\n"
    "from kernelkiln.guard import GuardConfig, GuardSession\nfrom kernelkiln.task import load_task\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
    "examples = Path({root!r}) / 'kernelkiln' / 'examples'\n"
    "source = (examples / 'seeds' / 'row_softmax.py').read_text()\n"
    "with GuardSession(load_task(examples / 'row_softmax.py'), GuardConfig(isolation='best-effort')) as guard:\n"
    "    while time.time() < {end}:\n        guard.evaluate(source)\n"
)
STREAM = (
    "import time, numpy as np\na = np.ones({n} // 4, np.float32)\nb = np.empty_like(a)\n"
    "while time.time() < {end}:\n    np.copyto(b, a)\n    np.copyto(a, b)\n"
)


def sources() -> tuple[str, str]:
    """The fast candidate and the same kernel with EXTRA_SHARE of the rows computed again (correct, slower)."""
    fast = knobs.apply(SEED.read_text(), GOOD)
    extra = (
        f"{CALL}\n        k = max(1, round(x.shape[0] * {EXTRA_SHARE}))\n"
        "        lib.softmax_rows(x, torch.empty_like(x[:k]), k, x.shape[1])"
    )
    assert fast.count(CALL) == 1, "the seed's forward changed"
    return fast, fast.replace(CALL, extra)


def hog_scripts(condition: str, end: float) -> list[str]:
    """One Python script per hog process for ``condition``."""
    cores = os.cpu_count() or 1
    if condition == "quiet":
        return []
    if condition.startswith("cpu"):
        return [BUSY.format(end=end)] * (int(condition[3:]) * cores)
    if condition == "membw":
        return [STREAM.format(n=max(256 << 20, 8 * last_level_cache_bytes()), end=end)] * cores
    if condition == "intermittent":
        return [BLINK.format(end=end)] * cores
    if condition == "jobs":
        return [JOB.format(root=str(ROOT), end=end)] * 2 + [BUSY.format(end=end)]
    raise SystemExit(f"unknown condition {condition!r} (known: {', '.join(CONDITIONS)})")


@contextlib.contextmanager
def hogs(condition: str, seconds: float) -> Iterator[None]:
    """Run ``condition``'s hogs (each ending by itself after ``seconds``), warmed up, until the block ends."""
    scripts = hog_scripts(condition, time.time() + seconds)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for script in scripts:
            procs.append(subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.DEVNULL))
        if procs:
            time.sleep(JOBS_WARMUP_S if condition == "jobs" else WARMUP_S)
        yield
    finally:
        for proc in procs:
            proc.terminate()  # a job closes its guard session (and its workers) on SIGTERM
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def first_workload(task: Task) -> Task:
    """The task judged on its first workload alone (256 x 1024), for short evaluations. The guard's workers load the
    whole file, but they are asked for workloads by index, so they time the same one."""
    return dataclasses.replace(task, workloads=task.workloads[:1])


def unmeasured(v: Verdict) -> bool:
    return bool(getattr(v, "unmeasured", False)) or (v.verdict == "ACCEPT" and v.stage == "time" and not v.timed)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def read_rows(path: Path, tag: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("tag") == tag]


def record(v: Verdict, condition: str, pair: str, trial: int, seconds: float, context: dict[str, Any]) -> dict:
    return {
        **context,
        "condition": condition,
        "pair": pair,
        "trial": trial,
        "verdict": v.verdict,
        "stage": v.stage,
        "reason": v.reason,
        "speedup": v.speedup,
        "speedup_vs_incumbent": v.speedup_vs_incumbent,
        "noise_margin": v.noise_margin,
        "unmeasured": unmeasured(v),
        "seconds": round(seconds, 3),
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def progress(row: dict[str, Any], trials: int) -> str:
    head = f"{row['condition']} {row['pair']} {row['trial'] + 1}/{trials}: {row['verdict']}"
    if row["speedup_vs_incumbent"] is None:
        return f"{head} ({row['reason']}) {row['seconds']:.1f}s"
    return f"{head} {row['speedup_vs_incumbent']:.2f}x (±{row['noise_margin']:.1%}) {row['seconds']:.1f}s"


def soak(conditions: list[str], trials: int, out: Path, tag: str) -> None:
    done = {(r["condition"], r["pair"], r["trial"]) for r in read_rows(out, tag)}
    if all((c, p, t) in done for t in range(trials) for c in conditions for p in PAIRS):
        return
    fast, slow = sources()
    pairs = {"identical": (fast, fast), "faster": (fast, slow), "slower": (slow, fast)}
    context = {"tag": tag, "commit": git("rev-parse", "--short", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    context |= {"cpu": cpu_name(), "cpu_count": os.cpu_count()}
    out.parent.mkdir(parents=True, exist_ok=True)
    with GuardSession(first_workload(load_task(TASK)), GuardConfig()) as guard, out.open("a") as sink:
        for source in (fast, slow):  # warm: reference worker, native build cache
            first = guard.evaluate(source, timed=False)
            if first.verdict != "ACCEPT":
                raise SystemExit(f"a pair's source was rejected: {first.reason}")
        for trial in range(trials):
            for condition in conditions:
                todo = [p for p in PAIRS if (condition, p, trial) not in done]
                if not todo:
                    continue
                with hogs(condition, HOG_LIMIT_S * len(todo)):
                    for pair in todo:
                        start = time.perf_counter()
                        v = guard.evaluate(pairs[pair][0], incumbent=pairs[pair][1])
                        row = record(v, condition, pair, trial, time.perf_counter() - start, context)
                        sink.write(json.dumps(row) + "\n")
                        sink.flush()
                        print(progress(row, trials), file=sys.stderr)


def rate(count: int, total: int) -> float | None:
    return round(count / total, 4) if total else None


def cell(rows: list[dict[str, Any]], pair: str) -> dict[str, Any]:
    """The figures of one condition and pair (see the module docstring)."""
    counts = Counter(r["verdict"] for r in rows)
    measured = [r for r in rows if not r["unmeasured"] and r["speedup_vs_incumbent"] is not None]
    figures = [r["speedup_vs_incumbent"] for r in measured]
    wrong_keep = counts["KEEP"] if pair != "faster" else 0
    wrong_revert = counts["REVERT"] if pair != "slower" else 0
    missed = sum(r["verdict"] != RIGHT[pair] for r in measured) if pair != "identical" else 0
    return {
        "n": len(rows),
        "verdicts": dict(counts),
        "false_keep": wrong_keep,
        "false_revert": wrong_revert,
        "not_measured": sum(r["unmeasured"] for r in rows),
        "false_keep_rate": rate(wrong_keep, len(rows)),
        "false_revert_rate": rate(wrong_revert, len(rows)),
        "missed_rate": rate(missed, len(measured)) if pair != "identical" else None,
        "not_measured_rate": rate(sum(r["unmeasured"] for r in rows), len(rows)),
        "cv": round(statistics.stdev(figures) / statistics.mean(figures), 4) if len(figures) > 1 else None,
        "median": round(statistics.median(figures), 4) if figures else None,
    }


def totals(cells: list[dict[str, Any]]) -> dict[str, int]:
    return {k: sum(c[k] for c in cells) for k in ("n", "false_keep", "false_revert", "not_measured")}


def summarise(rows: list[dict[str, Any]], tag: str) -> dict[str, Any]:
    conditions: dict[str, Any] = {}
    for condition in [c for c in CONDITIONS if any(r["condition"] == c for r in rows)]:
        here = [r for r in rows if r["condition"] == condition]
        pairs = {p: cell([r for r in here if r["pair"] == p], p) for p in PAIRS if any(r["pair"] == p for r in here)}
        conditions[condition] = {"totals": totals(list(pairs.values())), "pairs": pairs}
    everything = totals([c["totals"] for c in conditions.values()])
    hosts = sorted({f"{r.get('cpu')} x{r.get('cpu_count')}" for r in rows})
    return {"tag": tag, "hosts": hosts, "totals": everything, "conditions": conditions}


def show(value: float | None, percent: bool = True) -> str:
    if value is None:
        return "-"
    return f"{value:.1%}" if percent else f"{value:.3f}"


def table(summary: dict[str, Any]) -> str:
    t = summary["totals"]
    lines = [
        f"guard soak, tag {summary['tag']} on {', '.join(summary['hosts']) or 'nothing yet'}: {t['n']} judgements, "
        f"{t['false_keep']} false KEEP, {t['false_revert']} false REVERT, {t['not_measured']} not measured",
        f"{'condition':13s}{'pair':10s}{'n':>4s} {'K/A/R/X':>12s}{'fKEEP':>8s}{'fREV':>8s}{'missed':>8s}"
        f"{'unmeas':>8s}{'CV':>8s}{'median':>8s}",
    ]
    for condition, entry in summary["conditions"].items():
        for pair, c in entry["pairs"].items():
            v = c["verdicts"]
            kar = "/".join(str(v.get(k, 0)) for k in ("KEEP", "ACCEPT", "REVERT", "REJECT"))
            lines.append(
                f"{condition:13s}{pair:10s}{c['n']:4d} {kar:>12s}{show(c['false_keep_rate']):>8s}"
                f"{show(c['false_revert_rate']):>8s}{show(c['missed_rate']):>8s}{show(c['not_measured_rate']):>8s}"
                f"{show(c['cv']):>8s}{show(c['median'], percent=False):>8s}"
            )
        s = entry["totals"]
        lines.append(
            f"{condition:13s}{'(all)':10s}{s['n']:4d}  false KEEP {s['false_keep']}, false REVERT "
            f"{s['false_revert']}, not measured {s['not_measured']}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=30, help="judgements per pair per condition (default 30)")
    parser.add_argument("--conditions", default=",".join(CONDITIONS), help="comma-separated (default: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "figures" / "guard_soak.jsonl")
    parser.add_argument("--tag", help="series to add to and summarise (default: the git commit)")
    parser.add_argument("--json", action="store_true", help="print one JSON summary object instead of the table")
    parser.add_argument("--summary-only", action="store_true", help="summarise what --out holds; run nothing")
    args = parser.parse_args()
    tag = args.tag or git("rev-parse", "--short", "HEAD")
    conditions = [c for c in args.conditions.split(",") if c]
    for condition in conditions:
        hog_scripts(condition, 0.0)  # an unknown name fails before anything runs
    if not args.summary_only:
        soak(conditions, args.trials, args.out, tag)
    summary = summarise(read_rows(args.out, tag), tag)
    print(json.dumps(summary) if args.json else table(summary))


if __name__ == "__main__":
    main()
