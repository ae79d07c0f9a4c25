"""End to end: the spliced model against eager on fresh inputs, then eager, torch.compile and
spliced timed side by side.

Correctness: each trial draws fresh inputs (the user's input factory under a new torch
seed) and compares every output leaf with the float32 tolerance the guard applies to a
task (``|spliced - eager| <= atol + rtol * |eager|``), and finite where eager is. Wider
trials then redraw every floating input as the guard's robustness trials do (noise around
its mean with twice its spread), counted where eager's outputs stay finite.

Timing: rounds in which every arm runs a batch of calls, the arms' order rotating from
round to round; a round's ratio pairs arms measured moments apart, so a machine that
slows for a while slows both. Figures are medians over rounds, with the 10th-90th
percentile of the per-round ratio as its interval. A batch is accounted as the guard
accounts one (``guard.measurement.timing.batch_time``), in this process: its wall time
less the timing thread's run-queue wait, or, at one thread, the thread's own CPU time
where that binds (a measurement, not an estimate). A round in which some batch rested on
taking more than ``MAX_CORRECTION`` of its wall time out by estimate is dropped and run
again, up to ``rounds`` times; with fewer than ``MIN_CLEAN`` clean rounds by then the
timing is blind (``Timing.blind``, the guard's "not measured") and gives no figure. Unlike
the guard, the arms run in the calling process and are not isolated from each other: this
times the user's own model, not hostile code.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

from kernelkiln.guard.measurement import accounting
from kernelkiln.guard.measurement.timing import AGREE
from kernelkiln.task.model import DEFAULT_TOLERANCES, widen

MAX_CORRECTION = 0.25  # the guard's default ``max_correction``
MIN_CLEAN = 5  # clean rounds a figure needs


@dataclass(frozen=True)
class Check:
    """How the spliced model's outputs compared with eager's over ``trials`` fresh inputs (wider ones included)."""

    trials: int
    max_abs_error: float
    failure: str  # "" when every trial agreed
    wide: int = 0  # of the trials, those on wider inputs (where eager stayed finite)
    wide_skipped: int = 0  # wider inputs dropped: eager's outputs were not finite on them


def check(
    eager: Callable[..., Any],
    spliced: Callable[..., Any],
    make_inputs: Callable[[], tuple[Any, ...]],
    trials: int = 3,
    wide: int = 0,
) -> Check:
    """Compare ``spliced`` with ``eager`` on ``trials`` inputs drawn by ``make_inputs`` under fresh seeds, then on
    ``wide`` draws with every floating input widened as the guard's robustness trials widen a task's (none when
    the model takes no floating input: there is nothing to widen)."""
    worst, done, skipped = 0.0, 0, 0
    draws = [(trial, False) for trial in range(trials)] + [(trials + k, True) for k in range(wide)]
    for trial, widened in draws:
        torch.manual_seed(7919 + trial)
        inputs = make_inputs()
        if widened:
            if not any(isinstance(x, torch.Tensor) and x.is_floating_point() for x in inputs):
                break
            inputs = tuple(widen(x, 7919 + trial, j) for j, x in enumerate(inputs))
        with torch.no_grad():
            want = pytree.tree_leaves(eager(*inputs))
            if widened and not all(torch.isfinite(w).all() for w in want if isinstance(w, torch.Tensor)):
                skipped += 1
                continue
            got = pytree.tree_leaves(spliced(*inputs))
        done += 1
        label = f"{'wider ' if widened else ''}trial {trial}"
        worst, failure = _compare(want, got, label, worst)
        if failure:
            return Check(done, worst, failure, int(widened), skipped)
    return Check(done, worst, "", done - trials, skipped)


def _compare(want: list[Any], got: list[Any], label: str, worst: float) -> tuple[float, str]:
    """The worst absolute error so far, and why ``got`` fails the guard's float tolerance ("" if it does not)."""
    if len(want) != len(got):
        return worst, f"{label}: {len(got)} outputs, eager gave {len(want)}"
    for k, (w, g) in enumerate(zip(want, got, strict=True)):
        if not isinstance(w, torch.Tensor):
            continue
        if not isinstance(g, torch.Tensor) or g.shape != w.shape or g.dtype != w.dtype:
            return worst, f"{label}: output {k} is not a {w.dtype} tensor of {tuple(w.shape)}"
        atol, rtol = DEFAULT_TOLERANCES.get(str(w.dtype).removeprefix("torch."), (0.0, 0.0))
        finite = torch.isfinite(w)
        if not torch.equal(finite, torch.isfinite(g)):
            return worst, f"{label}: output {k} is not finite where eager's is"
        if not w.is_floating_point():
            if not torch.equal(w, g):
                return worst, f"{label}: output {k} differs from eager's"
            continue
        diff = (g[finite].double() - w[finite].double()).abs()
        if diff.numel():
            worst = max(worst, float(diff.max()))
            over = diff - (atol + rtol * w[finite].double().abs())
            if bool((over > 0).any()):
                return worst, f"{label}: output {k} is off by {float(diff.max()):.3g} (atol {atol}, rtol {rtol})"
    return worst, ""


@dataclass(frozen=True)
class Timing:
    """Median seconds per call of each arm, and each arm's speedup over eager with its interval."""

    seconds: dict[str, float]
    speedup: dict[str, float]  # over eager, median of per-round ratios
    interval: dict[str, tuple[float, float]]  # 10th and 90th percentile of the per-round ratio
    rounds: int
    per_round: tuple[dict[str, float], ...]
    disturbed: int = 0  # rounds dropped and run again: some batch rested on more than MAX_CORRECTION by estimate
    blind: str = ""  # why these rounds support no figure ("": they do)

    def ratio(self, slower: str, faster: str) -> float:
        """How many times faster ``faster`` ran than ``slower``: the median of the per-round ratios."""
        return statistics.median(r[slower] / r[faster] for r in self.per_round)

    def versus(self, arm: str, others: Sequence[str]) -> tuple[float, tuple[float, float]]:
        """How many times faster ``arm`` ran than the fastest of ``others`` in each round: the median of the
        per-round ratios and their 10th-90th percentile."""
        ratios = sorted(min(r[o] for o in others) / r[arm] for r in self.per_round)
        return statistics.median(ratios), _spread(ratios)


def _spread(ratios: list[float]) -> tuple[float, float]:
    """The 10th and 90th percentile of sorted per-round ratios."""
    return ratios[int(0.1 * (len(ratios) - 1))], ratios[round(0.9 * (len(ratios) - 1))]


def _batch(fn: Callable[[], Any], seconds: float) -> int:
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-6)
    return max(1, int(seconds / once))


def _timed(fn: Callable[[], Any], count: int) -> tuple[float, float]:
    """Seconds per call over ``count`` calls net of the run-queue wait, and the share of wall time taken out."""
    waited_ns, cpu = accounting.own_wait_ns(), time.thread_time()
    start = time.perf_counter()
    for _ in range(count):
        fn()
    wall = time.perf_counter() - start
    cpu = time.thread_time() - cpu
    by_wall = wall - (accounting.own_wait_ns() - waited_ns) / 1e9
    single = torch.get_num_threads() == 1
    busy = max(by_wall, cpu if single else 0.0, 0.05 * wall)
    measured = single and cpu >= max((1 - AGREE) * by_wall, 0.05 * wall)  # the CPU time binds, or agrees
    return busy / count, 0.0 if measured else max(0.0, wall - busy) / wall


def time_arms(arms: dict[str, Callable[[], Any]], rounds: int = 15, batch_s: float = 0.05) -> Timing:
    """Time ``arms`` (the first is the baseline) interleaved over ``rounds`` rounds."""
    names = list(arms)
    with torch.no_grad():
        for fn in arms.values():  # warm-up (compilation, first-call binding, caches)
            fn()
            fn()
        sizes = {n: _batch(arms[n], batch_s) for n in names}
        per_round: list[dict[str, float]] = []
        disturbed, r = 0, 0
        while len(per_round) < rounds:
            got, worst = {}, 0.0
            for n in names[r % len(names) :] + names[: r % len(names)]:
                got[n], correction = _timed(arms[n], sizes[n])
                worst = max(worst, correction)
            r += 1
            if worst > MAX_CORRECTION:
                disturbed += 1
                if disturbed >= rounds:
                    break
                continue
            per_round.append(got)
    if len(per_round) < min(MIN_CLEAN, rounds):
        blind = (
            f"only {len(per_round)} of {len(per_round) + disturbed} timing rounds were clean (the others rested on "
            f"more than {MAX_CORRECTION:.0%} of their time taken out as waits for a busy CPU)"
        )
        return Timing({}, {}, {}, len(per_round), tuple(per_round), disturbed, blind)
    base = names[0]
    seconds = {n: statistics.median(r[n] for r in per_round) for n in names}
    ratios = {n: sorted(r[base] / r[n] for r in per_round) for n in names}
    interval = {n: _spread(v) for n, v in ratios.items()}
    return Timing(
        seconds, {n: statistics.median(v) for n, v in ratios.items()}, interval, rounds, tuple(per_round), disturbed
    )
