"""Simulated evaluation devices: the real device queue, an evaluation of known duration, a verdict from the code.

For ``benchmarks/cluster_scaling.py``: it shows how the run's scheduler, agents and store keep
many devices busy, on a machine with two cores. Nothing here is a measurement of a kernel: the
"speedup" of a candidate is a fixed function of its code's hash, so a run's trajectory is
deterministic and its memory has verdicts to learn from.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from kernelkiln import native
from kernelkiln.errors import UserError
from kernelkiln.evaluation.pool import EvaluationInput
from kernelkiln.evaluation.scheduler import Device, DeviceQueue
from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.verdict import Verdict, WorkloadResult
from kernelkiln.task import Task

KIND = "simulated"
_NOISE = 0.02  # within this of the incumbent: ACCEPT, as the guard's noise band would say


@dataclass(frozen=True)
class Call:
    """One evaluation as the pool saw it (time.time() values)."""

    called: float  # the candidate was submitted
    started: float  # a device took it
    ended: float  # its verdict came back


def simulated_speedup(code: str) -> float:
    """A speedup in [0.5, 2) fixed by the code."""
    return 0.5 + 1.5 * int(hashlib.sha256(code.encode("utf-8")).hexdigest()[:8], 16) / 2**32


def simulated_verdict(
    workloads: list[str], source: str, incumbent: str | None, timed: bool, device: str, seconds: float
) -> Verdict:
    """The verdict a simulated device gives ``source``: KEEP, ACCEPT or REVERT against ``incumbent``."""
    speedup = simulated_speedup(source)
    if incumbent is None:
        decision = "KEEP"
    else:
        ratio = speedup / simulated_speedup(incumbent)
        decision = "KEEP" if ratio > 1 + _NOISE else "ACCEPT" if ratio >= 1 - _NOISE else "REVERT"
    results = [
        WorkloadResult(
            name=name, sizes={}, t_ref_s=1e-3, t_cand_s=1e-3 / speedup, speedup=speedup, spread=0.01, rounds=1, reps=1
        )
        for name in workloads
    ]
    return Verdict(
        verdict=decision,
        stage="verdict",
        reason="simulated evaluation",
        correct=True,
        timed=timed,
        speedup=speedup,
        workloads=results,
        device=device,
        seconds=seconds,
    )


class SimulatedActor:
    """A Ray actor in the place of an evaluation actor: the same methods, each evaluation ``duration_s`` of sleep.

    Used by ``RayPool(actor_class=simulated_actor(D))``: the real pool, queue and Ray calls, no guard."""

    duration_s = 1.0

    def __init__(self, platform: str, index: int, cores_per_device: int | None, node: str) -> None:
        # DeviceInfo's fields, as a dict: evaluation.actor would load torch in each of these processes.
        self.info = {"kind": KIND, "node": node, "host": "sim", "index": index, "cores": []}
        self.name = f"sim/{node[:8]}#{index}"
        self.log: list[tuple[float, float]] = []  # (start, end) of each evaluation, time.time()

    def describe(self) -> dict[str, Any]:
        return self.info

    def evaluate(
        self,
        shipment: object,
        guard: dict[str, Any],
        code: str,
        incumbent: str | None = None,
        timed: bool = True,
        time_budget_s: float | None = None,
    ) -> dict[str, Any]:
        start = time.time()
        time.sleep(self.duration_s)
        self.log.append((start, time.time()))
        # One workload, "simulated": loading the task for its workloads' names would import torch here.
        return simulated_verdict(["simulated"], code, incumbent, timed, self.name, self.duration_s).model_dump(
            mode="json"
        )

    def evaluations(self) -> list[tuple[float, float]]:
        return list(self.log)

    def close(self) -> None:
        pass


def simulated_actor(duration_s: float) -> type:
    """A SimulatedActor class whose evaluations last ``duration_s``."""
    return type("SimulatedActor", (SimulatedActor,), {"duration_s": duration_s})


class SimulatedPool:
    """``devices`` simulated devices, each judging one candidate in ``duration_s``."""

    device_kind = KIND

    def __init__(self, devices: int, duration_s: float):
        self.queue = DeviceQueue([Device(name=f"sim#{i}", kind=KIND, handle=None) for i in range(devices)])
        self.duration_s = duration_s
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def submit(self, inputs: Sequence[EvaluationInput]) -> list[Future[Verdict]]:
        return [self.queue.submit(self._work(item, time.time())) for item in inputs]

    def _work(self, item: EvaluationInput, called: float) -> Callable[[Device], Verdict]:
        workloads = [w.name for w in item.task.workloads]

        def work(device: Device) -> Verdict:
            started = time.time()
            time.sleep(self.duration_s)
            ended = time.time()
            with self._lock:
                self.calls.append(Call(called, started, ended))
            return simulated_verdict(workloads, item.code, item.incumbent, item.timed, device.name, ended - started)

        return work

    def native_requests(self, task: Task, guard: GuardConfig, source: str) -> list[native.BuildRequest]:
        return []  # a simulated device builds nothing

    def build_as_sandbox(self, task: Task, guard: GuardConfig, request: native.BuildRequest) -> native.BuildResult:
        raise UserError("a simulated device builds nothing natively")

    def tasks_at_once(self, agents: int) -> int:
        return self.queue.tasks_at_once(agents)

    def judgeable(self, task: Task) -> frozenset[str] | None:
        return None

    def measured_start(self, task: Task) -> str | None:
        return None

    def release(self, task: Task) -> None:
        pass  # nothing is kept per task

    def close(self) -> None:
        pass
