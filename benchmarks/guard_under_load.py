"""Does a verdict survive a busy machine? The same evaluations quiet and under a CPU hog.

    python benchmarks/guard_under_load.py [--trials 10] [--json]

quiet:                 --trials evaluations of a good candidate on the bundled row_softmax
                       task, nothing else running: CV and median of the speedup
loaded:                the same with a CPU hog on every core (started, bounded in time and
                       stopped by this script)
loaded_over_quiet:     median loaded speedup over median quiet speedup (1.0: unmoved)
identical_keep/_reject: of --trials evaluations of that candidate against an identical
                       incumbent under the hog, how many were KEEP / REJECT (each should
                       be ACCEPT)
long_reduction_reject: of --trials evaluations of an honest sequential float32 row sum
                       over 65536 columns, how many were REJECT (each should pass)
estimators:            the same rounds summarised three ways (median of paired ratios,
                       ratio of minima, 20%-trimmed mean of paired log-ratios): each one's
                       CV quiet and loaded, loaded_over_quiet, and the identical runs'
                       largest distance from 1.0
All evaluations run in one process, side by side; figures are ratios, never absolute times.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelkiln.guard import GuardConfig, GuardSession
from kernelkiln.guard.measurement.timing import Series
from kernelkiln.task import (
    knobs,
    load_task,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "kernelkiln" / "examples"
GOOD = {"FLAGS": ["-O3", "-march=native", "-ffast-math"], "ACCUMULATORS": 4}
HOG = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@contextlib.contextmanager
def cpu_hog(seconds: float) -> Iterator[None]:
    """One busy process per core, each ending by itself after ``seconds`` at the latest."""
    hogs = [
        subprocess.Popen([sys.executable, "-c", HOG.format(seconds=seconds)], stdin=subprocess.DEVNULL)
        for _ in range(os.cpu_count() or 1)
    ]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _trimmed(logs: list[float], share: float = 0.2) -> float:
    cut = int(len(logs) * share)
    kept = sorted(logs)[cut : len(logs) - cut] or logs
    return math.exp(statistics.mean(kept))


ESTIMATORS: dict[str, Callable[[Series, str, str], float]] = {
    "median_of_ratios": lambda s, num, den: math.exp(statistics.median(s.log_ratios(num, den))),
    "ratio_of_minima": lambda s, num, den: min(s.times[num]) / min(s.times[den]),
    "trimmed_mean": lambda s, num, den: _trimmed(s.log_ratios(num, den)),
}


class Recorder:
    """Collects each evaluation's timing rounds (GuardSession's observe hook)."""

    def __init__(self) -> None:
        self.current: list[Series] = []

    def __call__(self, workload: str, series: Series) -> None:
        self.current.append(series)

    def take(self) -> list[Series]:
        taken, self.current = self.current, []
        return taken


def _estimate(evaluations: list[list[Series]], num: str, how: str) -> list[float]:
    """Per evaluation: the geometric mean over workloads of ``how``'s speedup of cand over ``num``."""
    fn = ESTIMATORS[how]
    return [math.exp(statistics.mean(math.log(fn(s, num, "cand")) for s in ev)) for ev in evaluations]


def _cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values)


def _speedups(
    guard: GuardSession, recorder: Recorder, source: str, trials: int, incumbent: str | None = None, progress: str = ""
) -> tuple[list, list[list[Series]]]:
    verdicts, rounds = [], []
    for k in range(trials):
        verdicts.append(guard.evaluate(source, incumbent=incumbent))
        rounds.append(recorder.take())
        print(f"  {progress} {k + 1}/{trials}: {verdicts[-1].verdict} {verdicts[-1].reason}", file=sys.stderr)
    return verdicts, rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    n = args.trials

    task = load_task(EXAMPLES / "row_softmax.py")
    good = knobs.apply((EXAMPLES / "seeds" / "row_softmax.py").read_text(), GOOD)
    recorder = Recorder()
    with GuardSession(task, GuardConfig(), observe=recorder) as guard:
        first = guard.evaluate(good)  # warm: fork-server, reference worker, build cache
        if first.speedup is None:
            raise SystemExit(f"the good candidate was rejected: {first.reason}")
        recorder.take()
        quiet, quiet_rounds = _speedups(guard, recorder, good, n, progress="quiet")
        # Long enough for both loaded phases; the hogs end by themselves if this process dies.
        with cpu_hog(seconds=60.0 * n):
            loaded, loaded_rounds = _speedups(guard, recorder, good, n, progress="loaded")
            identical, identical_rounds = _speedups(guard, recorder, good, n, incumbent=good, progress="identical")
        placement = first.timing.placement.model_dump() if first.timing else None

    reduction = load_task(EXAMPLES / "row_sum.py", {"batch_size": 64, "dim": 65536})
    with GuardSession(reduction, GuardConfig()) as guard:
        honest = (EXAMPLES / "seeds" / "row_sum.py").read_text()
        long_sum = [guard.evaluate(honest, timed=False) for _ in range(n)]

    def summary(verdicts: list) -> dict:
        values = [v.speedup for v in verdicts if v.speedup is not None]
        return {"cv": round(_cv(values), 4), "median_speedup": round(statistics.median(values), 4)}

    counts = Counter(v.verdict for v in identical)
    estimators = {}
    for how in ESTIMATORS:
        q, ld = _estimate(quiet_rounds, "ref", how), _estimate(loaded_rounds, "ref", how)
        same = _estimate(identical_rounds, "inc", how)
        estimators[how] = {
            "quiet_cv": round(_cv(q), 4),
            "loaded_cv": round(_cv(ld), 4),
            "loaded_over_quiet": round(statistics.median(ld) / statistics.median(q), 4),
            "identical_max_deviation": round(max(abs(math.log(x)) for x in same), 4),
        }
    result = {
        "quiet": summary(quiet),
        "loaded": summary(loaded),
        "loaded_over_quiet": round(summary(loaded)["median_speedup"] / summary(quiet)["median_speedup"], 4),
        "identical_keep": counts.get("KEEP", 0),
        "identical_reject": counts.get("REJECT", 0),
        "long_reduction_reject": sum(v.verdict == "REJECT" for v in long_sum),
        "trials": n,
        "identical_verdicts": dict(counts),
        "long_reduction_reasons": sorted({v.reason for v in long_sum if v.verdict == "REJECT"}),
        "dropped_rounds": {
            "quiet": sum(w.dropped for v in quiet for w in v.workloads),
            "loaded": sum(w.dropped for v in loaded for w in v.workloads),
        },
        "placement": placement,
        "estimators": estimators,
        "task": task.name,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"guard under load on {task.name}, {n} evaluations each (placement {placement}):")
    for phase in ("quiet", "loaded"):
        print(f"  {phase:7s} median speedup {result[phase]['median_speedup']:.3f}x, CV {result[phase]['cv']:.1%}")
    print(f"  loaded / quiet {result['loaded_over_quiet']:.3f}; identical incumbent under load: {dict(counts)}")
    print(f"  honest 65536-column float32 row sum: {result['long_reduction_reject']} of {n} REJECT")
    for how, e in estimators.items():
        print(
            f"  estimator {how:17s} CV quiet {e['quiet_cv']:.1%} loaded {e['loaded_cv']:.1%}, "
            f"loaded/quiet {e['loaded_over_quiet']:.3f}, identical max |log| {e['identical_max_deviation']:.3f}"
        )


if __name__ == "__main__":
    main()
