"""Interleaved timing, measured with the parent's own clock.

Each batch is one request to one worker: the parent times a candidate's round trip
itself, so a candidate cannot forge its time; its own figure is only checked against it.
The trusted reference worker's own clock is used for the reference (see ``_batch``).
Only the worker being timed runs: the others are stopped (SIGSTOP) meanwhile, so no
background thread of a candidate can slow the reference down.
"""

from __future__ import annotations

import math
import secrets
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelkiln.guard.check import compare, reference_outputs
from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.workers import Worker
from kernelkiln.platforms import Platform
from kernelkiln.task import Task


class TimingReject(Exception):
    """The candidate misbehaved while being timed."""


@dataclass
class Series:
    """Per-round seconds per call, one list per worker role."""

    times: dict[str, list[float]] = field(default_factory=dict)
    reps: dict[str, int] = field(default_factory=dict)

    def log_ratios(self, num: str, den: str) -> list[float]:
        return [math.log(a / b) for a, b in zip(self.times[num], self.times[den])]


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
    medians = [statistics.median(logs[i * size:(i + 1) * size]) for i in range(blocks)]
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


class Timer:
    """Times the workers of one evaluation on one workload."""

    def __init__(self, task: Task, ref_models: dict[int, torch.nn.Module], workers: dict[str, Worker],
                 config: GuardConfig, platform: Platform):
        self.task, self.ref_models, self.workers, self.config = task, ref_models, workers, config
        self.platform = platform
        self.overhead = self._round_trip()

    def _round_trip(self) -> float:
        """Fixed cost of a request, measured on the trusted reference worker only.

        It is subtracted from every batch (a hostile worker could slow its own empty
        requests down to inflate it, so its own are never used).
        """
        samples = []
        for _ in range(15):
            start = time.perf_counter()
            self.workers["ref"].request({"op": "nop"}, self.config.call_timeout_s)
            samples.append(time.perf_counter() - start)
        return min(samples)  # the fixed part of the cost; jitter above it is noise, not overhead

    def _batch(self, role: str, index: int, reps: int, probe: tuple[int, int] | None) -> float:
        worker, cfg = self.workers[role], self.config
        if probe is not None:
            worker.request({"op": "refresh", "workload": index, "index": probe[0], "seed": probe[1]}, cfg.call_timeout_s)
        others = [w for r, w in self.workers.items() if r != role]
        for other in others:
            other.freeze()
        try:
            start = time.perf_counter()
            reply = worker.request({"op": "run", "workload": index, "reps": reps,
                                    "last": probe[0] if probe else None}, cfg.call_timeout_s)
            wall = time.perf_counter() - start
        finally:
            for other in others:
                other.thaw()
        if not reply.get("ok"):
            raise TimingReject(f"raised while timed: {reply.get('error')}")
        reported = float(reply.get("elapsed_s", 0.0))
        if not 0.0 <= reported <= wall * 1.05 + 1e-4:
            raise TimingReject(f"clock tampering: the worker reported {reported:.6f}s for a batch the guard "
                               f"measured at {wall:.6f}s")
        if probe is not None:
            self._verify_probe(role, index, probe[1])
        if role == "ref":
            # The reference worker runs only trusted code, so its own clock is believed: on a busy
            # machine the round trip can take milliseconds longer than the work, and a reference
            # inflated by that would show candidates phantom speedups. Candidates keep the parent's
            # clock, which such delays can only make slower, never faster.
            return max(reported, 1e-9) / reps
        return max(wall - self.overhead, 0.05 * wall) / reps

    def _verify_probe(self, role: str, index: int, seed: int) -> None:
        reply = self.workers[role].request({"op": "fetch"}, self.config.call_timeout_s)
        _, refs = reference_outputs(self.task, self.ref_models[index], index, seed)
        outs = reply.get("outputs") or []
        if len(outs) != len(refs):
            raise TimingReject("wrong number of outputs while timed")
        for j, (r, o) in enumerate(zip(refs, outs)):
            problem = compare(self.task, r, o, f"output {j}")
            if problem:
                raise TimingReject(f"wrong result while timed (behaves differently when timed): {problem}")

    def _calibrate(self, role: str, index: int) -> int:
        """Repetitions for one batch to last ``batch_target_s`` (doubling, like timeit's autorange)."""
        target, reps = self.config.batch_target_s, 1
        while True:
            # min of three (the request's own cost already taken off): a hiccup must not stop the doubling
            busy = min(self._batch(role, index, reps, None) for _ in range(3)) * reps
            if busy >= 0.5 * target or reps >= 1 << 20:
                return max(1, round(reps * target / busy))
            reps *= 2

    def _recalibrate(self, series: Series) -> bool:
        """Raise the repetitions of roles whose first batches fell far short of the target."""
        changed = False
        for role, times in series.times.items():
            want = math.ceil(self.config.batch_target_s / max(statistics.median(times[-3:]), 1e-9))
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
        return len(logs) >= 2 * self.config.min_rounds and \
            abs(statistics.median(logs)) - self.config.margin_sigmas * se > 4 * self.config.min_margin

    def run(self, index: int, budget_s: float) -> Series:
        cfg, roles = self.config, list(self.workers)
        inputs = self.task.make_inputs(self.task.workloads[index], 0)
        count = int(min(cfg.max_input_sets, max(2, math.ceil(  # flush_bytes() is 2x the last-level cache
            cfg.flush_factor * self.platform.flush_bytes() / 2 / max(1, _input_bytes(inputs))))))
        base = secrets.randbits(30)
        for worker in self.workers.values():
            worker.request({"op": "prepare", "workload": index, "count": count, "seed": base}, cfg.call_timeout_s)
        for role in roles:
            self._batch(role, index, cfg.warmup_reps, None)
        # Each role gets its own repetitions, so every batch lasts about batch_target_s and the
        # batches compared within a round run close together in time: on a machine whose speed
        # drifts, that closeness is what makes the pairing cancel the drift.
        series = Series({r: [] for r in roles}, reps={role: self._calibrate(role, index) for role in roles})
        deadline = time.monotonic() + budget_s
        restarts, previous = 0, None
        for rnd in range(cfg.max_rounds + 9):
            if len(series.times["ref"]) >= cfg.max_rounds:
                break
            order = _order(roles, previous)
            previous = order[-1]
            for role in order:
                probe = None if role == "ref" else (secrets.randbelow(count), secrets.randbits(30))
                series.times[role].append(self._batch(role, index, series.reps[role], probe))
            if len(series.times["ref"]) % 3 == 0 and restarts < 3 and rnd < cfg.max_rounds // 2 \
                    and self._recalibrate(series):
                restarts += 1  # batches far shorter than intended: their numbers were mostly request cost
                series.times = {r: [] for r in roles}
                continue
            if len(series.times["ref"]) >= cfg.min_rounds and (time.monotonic() > deadline or all(
                    self._settled(series.log_ratios(num, "cand")) for num in roles if num != "cand")):
                break
        return series
