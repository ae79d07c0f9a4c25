"""Interleaved timing: every role measured the same way, by the parent, net of scheduling.

Each batch is one request to one worker (reference, candidate or incumbent alike). The
parent takes its own clock around the request and the kernel's accounting of the worker
before and after it (``accounting``: CPU time of all its threads, and how long each sat
runnable on a run queue while something else had the core). A batch's time is

    max(wall - request cost - longest run-queue wait - the timing thread's own wait,
        (CPU time - a request's CPU cost) / threads)

Why it cannot be forged: the wall clock and the accounting belong to the parent and the
kernel; nothing a worker says about itself is believed (its own figure is only checked to
fit inside the wall time). Taking out run-queue waits can only remove time the worker
was kept from running; work hidden in its own threads while its main thread waits in
the queue still shows in its CPU time, and the CPU bound charges every thread's run time
against the ``threads`` cores it was given, so neither extra threads nor cores taken
beyond its share make it faster. What it assumes: the worker's work runs in its own
threads (processes it starts are refused, see ``GuardSession._watch``); run-queue waits
come from the kernel's schedstat (CONFIG_SCHED_INFO); where it is missing, only the wall
clock is used and the verdict's ``timing.accounting`` says so. Each reading is taken once
no thread of the worker runs (``accounting.settle``: the kernel brings a running thread's
figures up to date only at a scheduler tick); a multi-threaded worker is stopped (SIGSTOP)
for it the moment its reply arrives, so a batch is charged for the request alone: an
OpenMP pool that spins idle for milliseconds after each reply (libgomp's default) once
made a 0.2 ms reference read 4 ms at two threads, and a single-threaded candidate escaped
that charge (``Timer._read``).
Only the worker being timed runs; the others are stopped meanwhile, so no background
thread of a candidate can slow the reference down. (Holding every worker stopped between
its requests too gave single workers shifts of 20% that lasted a whole evaluation on a
virtual machine, so workers idle normally between requests.)

A round in which some batch rested on more than ``max_correction`` of its wall time taken
out by estimate, or whose readings were not exact, is dropped and run again; a single
thread's CPU time is a measurement, not an estimate (``batch_time``). Batches last long
enough that the request's own measured jitter is under 1% of a batch.
"""

from __future__ import annotations

import math
import secrets
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.correctness.check import compare, reference_outputs
from kernelkiln.guard.measurement import accounting
from kernelkiln.guard.measurement.accounting import Usage
from kernelkiln.guard.worker.workers import Worker
from kernelkiln.platforms import Platform
from kernelkiln.task import Task

JITTER_SHARE = 0.01  # a request's own jitter may be at most this share of a batch
MAX_BATCH_S = 0.25  # however noisy the requests, a batch lasts no longer than this
_NOP_SAMPLES = 31
AGREE = 0.02  # a single-threaded batch's two estimates agree when within this share of each other
SETTLE_S = 0.01  # how long a stopped worker's threads may take to leave the CPU before its readings are inexact


class TimingReject(Exception):
    """The candidate misbehaved while being timed."""


@dataclass
class Series:
    """Per-round seconds per call, one list per worker role, of the rounds kept."""

    times: dict[str, list[float]] = field(default_factory=dict)
    reps: dict[str, int] = field(default_factory=dict)
    corrections: list[float] = field(default_factory=list)  # per kept round: its batches' largest correction
    waits: list[float] = field(default_factory=list)  # per kept round: its batches' largest share kept from running
    dropped: int = 0  # rounds dropped because a batch of theirs was corrected too much
    blind: str = ""  # why these rounds cannot support a verdict ("": they can)

    def log_ratios(self, num: str, den: str) -> list[float]:
        return [math.log(a / b) for a, b in zip(self.times[num], self.times[den], strict=False)]


@dataclass(frozen=True)
class Sample:
    """One batch: seconds per call, the share of its wall time taken out by estimate, and the share the worker
    or the guard spent kept from running (CPU time not granted: a single thread's CPU time is still exact, but
    each preemption costs a refill of its caches that no accounting sees)."""

    seconds: float
    correction: float
    waited: float = 0.0


@dataclass(frozen=True)
class RequestCost:
    """A request's fixed cost, measured on the trusted reference worker (wall and CPU seconds)."""

    wall_s: float
    cpu_s: float
    jitter_s: float  # robust spread of its wall time


def rse(logs: list[float]) -> float:
    """Standard error of the median of per-round log-ratios (a relative error of the speedup).

    The larger of two estimates: a robust one (scaled median absolute deviation), because
    on a shared machine most noise is rare large outliers; and one from the spread of the
    medians of consecutive blocks of rounds, because the machine's speed also drifts in
    phases that last many rounds, so rounds are not independent.
    """
    n = len(logs)
    if n < 2:
        return float("inf")
    mid = statistics.median(logs)
    mad = statistics.median(abs(x - mid) for x in logs)
    robust = 1.2533 * 1.4826 * mad / math.sqrt(n)
    blocks = min(5, n // 3)
    if blocks < 2:
        return robust
    size = n // blocks
    medians = [statistics.median(logs[i * size : (i + 1) * size]) for i in range(blocks)]
    return max(robust, statistics.stdev(medians) / math.sqrt(blocks))


def _order(roles: list[str], previous: str | None) -> list[str]:
    """A random order of the roles that does not start with the role that ran last.

    A worker timed twice in a row runs faster the second time (its caches and predictors
    are still warm), so no role may follow itself, and which role follows which is random:
    a fixed order would favour some role systematically.
    """
    while True:
        order = list(roles)
        secrets.SystemRandom().shuffle(order)
        if order[0] != previous or len(order) == 1:
            return order


def _input_bytes(inputs: list[Any]) -> int:
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


def batch_time(
    wall: float,
    usage: accounting.Delta,
    cost: RequestCost,
    threads: int,
    cpu_accounting: bool,
    accounted: bool,
    reps: int,
) -> Sample:
    """Seconds per call of one batch, and the share of its wall time taken out by estimate."""
    net = wall - cost.wall_s
    if not cpu_accounting:  # a device's work is not CPU time: the wall clock, undisturbed rounds only
        waited = (usage.worker_wait_s + usage.guard_wait_s) / wall if usage.exact else float(accounted)
        return Sample(seconds=max(net, 0.05 * wall) / reps, correction=waited, waited=min(1.0, waited))
    if not usage.exact:  # no exact accounting: nothing is taken out, and a round it disturbs is run again
        return Sample(seconds=max(net, 0.05 * wall) / reps, correction=float(accounted))
    by_wall = net - usage.worker_wait_s - usage.guard_wait_s
    by_cpu = (usage.cpu_s - cost.cpu_s) / threads
    busy = max(by_wall, by_cpu, 0.05 * wall)
    waited = min(1.0, (usage.worker_wait_s + usage.guard_wait_s) / wall)
    # One thread's CPU time is a measurement, not an estimate: when it binds, or the wall clock less
    # the waits agrees with it, nothing rests on the waits taken out.
    measured = threads == 1 and by_cpu >= (1 - AGREE) * by_wall
    return Sample(seconds=busy / reps, correction=0.0 if measured else max(0.0, net - busy) / wall, waited=waited)


class Timer:
    """Times the workers of one evaluation on one workload."""

    def __init__(
        self,
        task: Task,
        ref_models: dict[int, torch.nn.Module],
        workers: dict[str, Worker],
        config: GuardConfig,
        platform: Platform,
        threads: int,
        look: Callable[[Series], bool] | None = None,
    ):
        """``look``: asked after each round; True ends timing there, whatever the stop rule says (a
        replicate's early look, ``scoring.replicate_settled``)."""
        self.task, self.ref_models, self.workers, self.config = task, ref_models, workers, config
        self.look = look
        self.platform, self.threads = platform, threads
        self.accounted = accounting.available()
        self.cpu_accounting = self.accounted and platform.device == "cpu"
        self.cost = self._request_cost()
        self.batch_target_s = min(MAX_BATCH_S, max(config.batch_target_s, self.cost.jitter_s / JITTER_SHARE))

    def _request_cost(self) -> RequestCost:
        """Fixed cost of a request and its jitter, measured on the trusted reference worker only.

        It is subtracted from every batch (a hostile worker could slow its own empty
        requests down to inflate it, so its own are never used).
        """
        walls, cpus = [], []
        for _ in range(_NOP_SAMPLES):
            _, usage, wall = self._request("ref", {"op": "nop"})
            walls.append(wall)
            cpus.append(usage.cpu_s)
        mid = statistics.median(walls)
        # min: the fixed part of the cost (an undisturbed request); jitter above it is noise, not overhead
        return RequestCost(
            wall_s=min(walls), cpu_s=min(cpus), jitter_s=1.4826 * statistics.median(abs(w - mid) for w in walls)
        )

    def _read(self, worker: Worker) -> tuple[Usage, bool]:
        """The worker's accounting, read once no thread of it runs (exact).

        A multi-threaded worker is stopped for the reading, so its idle pool's spin after the
        reply is not the batch's. A single-threaded one has no pool: it has answered and waits
        for its next request, and is read as it is. (Whether stopping has side effects is not
        settled: single workers that ran twice as slow for a whole evaluation were seen with
        and without it on this VM, see docs/guide/guard-soak.md.)
        """
        if self.threads > 1:
            worker.freeze()
        try:
            exact = accounting.settle(worker.pid, SETTLE_S)
            return Usage.read(worker.pid), exact
        finally:
            worker.thaw()

    def _request(self, role: str, message: dict[str, Any]) -> tuple[dict[str, Any], accounting.Delta, float]:
        """Send one request to ``role``'s worker: its reply, and its accounting and wall time around it."""
        worker = self.workers[role]
        before = self._read(worker) if self.accounted else None
        own = accounting.own_wait_ns()
        start = time.perf_counter()
        reply = worker.request(message, self.config.call_timeout_s)
        wall = time.perf_counter() - start
        own = accounting.own_wait_ns() - own
        after = self._read(worker) if before is not None else None  # at once: an idle pool's spin is not the batch's
        if not reply.get("ok"):
            raise TimingReject(f"raised while timed: {reply.get('error')}")
        if before is None or after is None:
            return reply, accounting.Delta(), wall
        cpu, waited = after[0].since(before[0])
        return (
            reply,
            accounting.Delta(
                cpu_s=cpu, worker_wait_s=waited, guard_wait_s=max(0, own) / 1e9, exact=before[1] and after[1]
            ),
            wall,
        )

    def _batch(self, role: str, index: int, reps: int, probe: tuple[int, int] | None) -> Sample:
        worker, cfg = self.workers[role], self.config
        if probe is not None:
            worker.request(
                {"op": "refresh", "workload": index, "index": probe[0], "seed": probe[1]}, cfg.call_timeout_s
            )
        others = [w for r, w in self.workers.items() if r != role]
        for other in others:
            other.freeze()
        try:
            reply, usage, wall = self._request(
                role, {"op": "run", "workload": index, "reps": reps, "last": probe[0] if probe else None}
            )
        finally:
            for other in others:
                other.thaw()
        reported = float(reply.get("elapsed_s", 0.0))
        if not 0.0 <= reported <= wall * 1.05 + 1e-4:
            raise TimingReject(
                f"clock tampering: the worker reported {reported:.6f}s for a batch the guard measured at {wall:.6f}s"
            )
        if probe is not None:
            self._verify_probe(role, index, probe[1])
        return batch_time(wall, usage, self.cost, self.threads, self.cpu_accounting, self.accounted, reps)

    def _verify_probe(self, role: str, index: int, seed: int) -> None:
        reply = self.workers[role].request({"op": "fetch"}, self.config.call_timeout_s)
        expected = reference_outputs(self.task, self.ref_models[index], index, seed)
        outs = reply.get("outputs") or []
        if len(outs) != len(expected.outputs):
            raise TimingReject("wrong number of outputs while timed")
        for j, (r, x, o) in enumerate(zip(expected.outputs, expected.oracle, outs, strict=False)):
            problem = compare(self.task, r, o, f"output {j}", x)
            if problem:
                raise TimingReject(f"wrong result while timed (behaves differently when timed): {problem}")

    def _calibrate(self, role: str, index: int) -> int:
        """Repetitions for one batch to last the batch target (doubling, like timeit's autorange)."""
        target, reps = self.batch_target_s, 1
        while True:
            # min of three (the request's own cost already taken off): a hiccup must not stop the doubling
            busy = min(self._batch(role, index, reps, None).seconds for _ in range(3)) * reps
            if busy >= 0.5 * target or reps >= 1 << 20:
                return max(1, round(reps * target / busy))
            reps *= 2

    def _recalibrate(self, series: Series) -> bool:
        """Raise the repetitions of roles whose first batches fell far short of the target."""
        changed = False
        for role, times in series.times.items():
            want = math.ceil(self.batch_target_s / max(statistics.median(times[-3:]), 1e-9))
            if want > 2 * series.reps[role]:
                series.reps[role] = want
                changed = True
        return changed

    def _settled(self, logs: list[float]) -> bool:
        """Precise enough, or so far outside the noise band that more rounds cannot change the verdict."""
        se = rse(logs)
        if se < self.config.target_rse:
            return True
        # Far outside the noise band, after enough rounds for the drift estimate to mean something.
        return (
            len(logs) >= 2 * self.config.min_rounds
            and abs(statistics.median(logs)) - self.config.margin_sigmas * se > 4 * self.config.min_margin
        )

    def run(self, index: int, budget_s: float) -> Series:
        """Timed rounds of workload ``index`` within about ``budget_s`` (``Series.blind`` says when they cannot
        support a verdict)."""
        cfg, roles = self.config, list(self.workers)
        inputs = self.task.make_inputs(self.task.workloads[index], 0)
        count = int(
            min(
                cfg.max_input_sets,
                max(
                    2,
                    math.ceil(  # flush_bytes() is 2x the last-level cache
                        cfg.flush_factor * self.platform.flush_bytes() / 2 / max(1, _input_bytes(inputs))
                    ),
                ),
            )
        )
        base = secrets.randbits(30)
        for worker in self.workers.values():
            worker.request({"op": "prepare", "workload": index, "count": count, "seed": base}, cfg.call_timeout_s)
        for role in roles:
            self._batch(role, index, cfg.warmup_reps, None)
        # Each role gets its own repetitions, so every batch lasts about the batch target and the
        # batches compared within a round run close together in time: on a machine whose speed
        # drifts, that closeness is what makes the pairing cancel the drift.
        series = Series({r: [] for r in roles}, reps={role: self._calibrate(role, index) for role in roles})
        deadline = time.monotonic() + budget_s
        restarts, previous, looked = 0, None, False
        for rnd in range(2 * cfg.max_rounds + 9):
            if len(series.times["ref"]) >= cfg.max_rounds:
                break
            order = _order(roles, previous)
            previous = order[-1]
            samples = {}
            for role in order:
                probe = None if role == "ref" else (secrets.randbelow(count), secrets.randbits(30))
                samples[role] = self._batch(role, index, series.reps[role], probe)
            correction = max(s.correction for s in samples.values())
            if correction > cfg.max_correction:
                series.dropped += 1  # disturbed beyond what the accounting can be trusted to take out
            else:
                for role, sample in samples.items():
                    series.times[role].append(sample.seconds)
                series.corrections.append(correction)
                series.waits.append(max(s.waited for s in samples.values()))
            kept = len(series.times["ref"])
            if kept and kept % 3 == 0 and restarts < 3 and rnd < cfg.max_rounds // 2 and self._recalibrate(series):
                restarts += 1  # batches far shorter than intended: their numbers were mostly request cost
                series.times, series.corrections, series.waits = {r: [] for r in roles}, [], []
                continue
            if self.look is not None and self.look(series):
                looked = True
                break
            if kept >= cfg.min_rounds and (
                time.monotonic() > deadline
                or all(self._settled(series.log_ratios(num, "cand")) for num in roles if num != "cand")
            ):
                break
            # Too few clean rounds: give up once the disturbed ones reach the cap, or twice the budget is spent
            # with some round disturbed. Clean rounds that are merely slow are taken up to min_rounds.
            overtime = series.dropped > 0 and time.monotonic() > deadline + budget_s
            if kept < cfg.min_rounds and (series.dropped >= cfg.max_rounds or overtime):
                break
        kept = len(series.times["ref"])
        if kept < cfg.min_rounds and not looked:
            series.blind = (
                f"only {kept} of {kept + series.dropped} timing rounds were clean (the others rested on more than "
                f"{cfg.max_correction:.0%} of their time taken out as waits for a busy CPU); "
                f"at least {cfg.min_rounds} are needed for a verdict"
            )
        return series
