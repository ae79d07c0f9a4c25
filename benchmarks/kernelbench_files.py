"""KernelBench's own files through `kiln lower --shrink K --check`: how many lower and are judged correct.

    python benchmarks/kernelbench_files.py KernelBench/ [--shrink 8] [--jobs 2] [--timeout 300] [--json OUT]

DIR is a KernelBench checkout's `KernelBench/` folder (or any folder of task files; `levelN`
subfolders are reported apart). Each file runs as its own `kiln lower FILE --shrink K --check --json`
process (so one file's crash or hang costs only that file) and lands in one of:

correct:   the candidate was generated and the guard judged it correct on every workload
wrong:     generated, but the guard's check refused it (the reason is kept)
refused:   `kiln lower` could not generate a candidate (the one-line reason is kept, grouped over files)
timeout:   the process ran past --timeout
crashed:   the process failed without kiln's one-line error (a bug: its last stderr line is kept)

Nothing is timed; it is a correctness sweep. Reasons are grouped with the file path stripped.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import provenance


def kiln(args: list[str], shrink: str, timeout: float) -> tuple[subprocess.CompletedProcess | None, float]:
    """``kiln ARGS [--shrink K]`` as its own process, and the seconds it took (None: it ran past ``timeout``)."""
    argv = [sys.executable, "-m", "kernelkiln", *args] + (["--shrink", shrink] if shrink not in ("", "1") else [])
    started = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, timeout
    return proc, round(time.perf_counter() - started, 1)


def run_one(path: Path, shrink: str, timeout: float) -> dict:
    """One file's outcome: status and, unless correct, the reason in one line."""
    with tempfile.TemporaryDirectory() as tmp:
        args = ["lower", str(path), "--check", "--json", "--out", str(Path(tmp) / "candidate.py")]
        proc, seconds = kiln(args, shrink, timeout)
    if proc is None:
        return {"status": "timeout", "reason": f"over {timeout:.0f} s", "seconds": seconds}
    errors = [line for line in proc.stderr.splitlines() if line.startswith("kiln: error:")]
    if proc.returncode in (0, 1) and proc.stdout.strip():  # 1: printed, and judged wrong
        check = json.loads(proc.stdout)["check"]
        if check["correct"]:
            return {"status": "correct", "seconds": seconds}
        return {"status": "wrong", "reason": f"{check['stage']}: {check['reason']}", "seconds": seconds}
    if errors:
        reason = errors[-1].removeprefix("kiln: error:").strip().replace(str(path) + ": ", "")
        return {"status": "refused", "reason": reason, "seconds": seconds}
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"status": "crashed", "reason": f"exit {proc.returncode}: {last}", "seconds": seconds}


def task_files(root: Path, levels: str, only: str = "") -> list[Path]:
    """The task files under ``root``'s levelN folders (``levels``: "1,2,3"; ``root`` itself where it has none),
    those whose name contains one of ``only``'s comma-separated words."""
    folders = [root / f"level{n}" for n in levels.split(",") if (root / f"level{n}").is_dir()]
    wanted = [w for w in only.split(",") if w] or [""]
    return sorted(p for folder in (folders or [root]) for p in folder.glob("*.py") if any(w in p.name for w in wanted))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="KernelBench's KernelBench/ folder, or a folder of task files")
    parser.add_argument("--shrink", default="8", metavar="K|TIME", help="a factor (8) or a time target (20ms)")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 1)), metavar="N")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S", help="per file (default 300)")
    parser.add_argument("--levels", default="1,2,3", help="levelN subfolders to run (default 1,2,3)")
    parser.add_argument("--only", default="", help="run only files whose name contains one of these (a,b,c)")
    parser.add_argument(
        "--json",
        type=Path,
        metavar="OUT",
        help="write every file's outcome here (an earlier run's there, at the same --shrink, is kept for the "
        "files not run now, each naming its run)",
    )
    args = parser.parse_args()
    if not args.root.is_dir():
        parser.error(f"{args.root}: not a folder")
    files = task_files(args.root, args.levels, args.only)
    if not files:
        parser.error(f"{args.root}: no task files")
    results: dict[str, dict] = {}
    started = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(run_one, p, args.shrink, args.timeout): p for p in files}
        for done, (future, path) in enumerate(futures.items(), 1):
            key = f"{path.parent.name}/{path.name}"
            results[key] = future.result()
            r = results[key]
            print(f"[{done}/{len(files)}] {key}: {r['status']} {r.get('reason', '')}", file=sys.stderr, flush=True)
    levels: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    reasons: collections.Counter = collections.Counter()
    for key, r in results.items():
        levels[key.split("/")[0]][r["status"]] += 1
        if r["status"] != "correct":
            reasons[f"{r['status']}: {r['reason'][:160]}"] += 1
    print(f"{len(files)} files, --shrink {args.shrink}, {time.perf_counter() - started:.0f} s")
    print(f"{'level':<8} {'files':>5} {'lowered':>7} {'correct':>7} {'wrong':>5} {'refused':>7} {'other':>5}")
    for level, c in sorted(levels.items()):
        lowered = c["correct"] + c["wrong"]
        print(
            f"{level:<8} {sum(c.values()):>5} {lowered:>7} {c['correct']:>7} {c['wrong']:>5} {c['refused']:>7}"
            f" {c['timeout'] + c['crashed']:>5}"
        )
    for reason, n in reasons.most_common():
        print(f"{n:>4}  {reason}")
    if args.json:
        write(args.json, results, args.shrink)


def write(out: Path, results: dict[str, dict], shrink: str) -> None:
    """Write the outcomes to ``out``. Where it holds an earlier run's at the same --shrink, that run's outcomes
    for the files not run now stay: each file names the run that judged it (its commit, ``#2`` on for another
    run at the same commit), and ``runs`` each run's provenance."""
    earlier = json.loads(out.read_text()) if out.exists() else {}
    if earlier.get("shrink") != shrink:
        earlier = {}
    runs = dict(earlier.get("runs", {}))
    level_runs = {level: p["commit"] for level, p in earlier.get("measured_by", {}).items()}  # an older form
    for p in [earlier["provenance"], *earlier.get("measured_by", {}).values()] if earlier else []:
        runs.setdefault(p["commit"], p)
    files = {
        k: {**v, "run": v.get("run") or level_runs.get(k.split("/")[0]) or earlier["provenance"]["commit"]}
        for k, v in earlier.get("files", {}).items()
    }
    now = provenance()
    key, n = now["commit"], 1
    while key in runs and runs[key]["command"] != now["command"]:  # another run at the same commit
        n += 1
        key = f"{now['commit']}#{n}"
    runs[key] = now
    files.update({k: {**v, "run": key} for k, v in results.items()})
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for key, r in files.items():
        counts[key.split("/")[0]][r["status"]] += 1
    record = {
        "provenance": now,
        "runs": {commit: runs[commit] for commit in sorted({f["run"] for f in files.values()})},
        "shrink": shrink,
        "levels": {level: dict(c) for level, c in sorted(counts.items())},
        "files": files,
    }
    out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
