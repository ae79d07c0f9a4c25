"""Interleaved timing, measured with the parent's own clock.

Each batch is one request to one worker: the parent times the round trip itself, so a
candidate cannot forge its time; the worker's own figure is only checked against it.
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
from kernelkiln.platforms.cpu import last_level_cache_bytes
from kernelkiln.task import Task


class TimingReject(Exception):
    """The candidate misbehaved while being timed."""


@dataclass
class Series:
    """Per-round seconds per call, one list per worker role."""

    times: dict[str, list[float]] = field(default_factory=dict)
    reps: int = 1

    def log_ratios(self, num: str, den: str) -> list[float]:
        return [math.log(a / b) for a, b in zip(self.times[num], self.times[den])]


def rse(logs: list[float]) -> float:
    """Relative standard error of the median of per-round log-ratios.

    Robust (scaled median absolute deviation): on a shared machine the noise is mostly
    rare large outliers, which the median ignores and a standard deviation would not.
    """
    if len(logs) < 2:
        return float("inf")
    mid = statistics.median(logs)
    mad = statistics.median(abs(x - mid) for x in logs)
    return 1.2533 * 1.4826 * mad / math.sqrt(len(logs))


def _input_bytes(inputs: list[Any]) -> int:
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


class Timer:
    """Times the workers of one evaluation on one workload."""

    def __init__(self, task: Task, ref_model: torch.nn.Module, workers: dict[str, Worker], config: GuardConfig):
        self.task, self.ref_model, self.workers, self.config = task, ref_model, workers, config
        self.overhead = self._round_trip()

    def _round_trip(self) -> float:
        """Cost of an empty request, measured on the trusted reference worker only.

        It is subtracted from every batch (a hostile worker could slow its own empty
        requests down to inflate it, so its own are never used).
        """
        samples = []
        for _ in range(7):
            start = time.perf_counter()
            self.workers["ref"].request({"op": "nop"}, self.config.call_timeout_s)
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

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
        return max(wall - self.overhead, 0.05 * wall) / reps

    def _verify_probe(self, role: str, index: int, seed: int) -> None:
        reply = self.workers[role].request({"op": "fetch"}, self.config.call_timeout_s)
        _, refs = reference_outputs(self.task, self.ref_model, index, seed)
        outs = reply.get("outputs") or []
        if len(outs) != len(refs):
            raise TimingReject("wrong number of outputs while timed")
        for j, (r, o) in enumerate(zip(refs, outs)):
            problem = compare(self.task, r, o, f"output {j}")
            if problem:
                raise TimingReject(f"wrong result while timed (behaves differently when timed): {problem}")

    def run(self, index: int, budget_s: float) -> Series:
        cfg, roles = self.config, list(self.workers)
        inputs = self.task.make_inputs(self.task.workloads[index], 0)
        count = int(min(cfg.max_input_sets, max(2, math.ceil(
            cfg.flush_factor * last_level_cache_bytes() / max(1, _input_bytes(inputs))))))
        base = secrets.randbits(30)
        for worker in self.workers.values():
            worker.request({"op": "prepare", "workload": index, "count": count, "seed": base}, cfg.call_timeout_s)
        for role in roles:
            self._batch(role, index, cfg.warmup_reps, None)
        single = min(min(self._batch(role, index, 1, None) for _ in range(3)) for role in roles)
        series = Series({r: [] for r in roles}, reps=max(1, math.ceil(cfg.batch_target_s / max(single, 1e-7))))
        deadline = time.monotonic() + budget_s
        for rnd in range(cfg.max_rounds):
            for role in (roles if rnd % 2 == 0 else roles[::-1]):
                probe = None if role == "ref" else (secrets.randbelow(count), secrets.randbits(30))
                series.times[role].append(self._batch(role, index, series.reps, probe))
            if rnd + 1 >= cfg.min_rounds and (time.monotonic() > deadline or all(
                    rse(series.log_ratios(num, "cand")) < cfg.target_rse for num in roles if num != "cand")):
                break
        return series
