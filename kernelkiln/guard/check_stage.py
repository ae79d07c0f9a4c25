"""The cascade's check stage: a loaded worker run on fresh inputs and judged against the reference's outputs."""

from __future__ import annotations

from kernelkiln.guard.correctness.check import WorkloadCases, judge_trials
from kernelkiln.guard.rejection import Reject, raised
from kernelkiln.guard.worker.workers import Worker
from kernelkiln.task import Task


def check_worker(
    task: Task, worker: Worker, cases: list[WorkloadCases], forbidden: frozenset[str], timeout_s: float
) -> bool:
    """Raise ``Reject`` for a wrong candidate (or one calling a ``forbidden`` reference op); True when it ran
    Triton kernels under Triton's interpreter. Each workload's trials may take ``timeout_s``, or longer where the
    reference's took long (``WorkloadCases.timeout_s``)."""
    interpreted = False
    for index, (workload, case) in enumerate(zip(task.workloads, cases, strict=False)):
        message = {"op": "check", "workload": index, "seeds": case.seeds, "wide": case.wide}
        reply = worker.request(message, case.timeout_s(timeout_s))
        if not reply.get("ok"):
            raise Reject("check", f"workload {workload.name}: raised {raised(reply)}")
        trials = reply.get("trials") or []
        if len(trials) != len(case.seeds):
            raise Reject("check", "the worker returned the wrong number of trials")
        called = sorted(set(trials[0].get("ops") or []) & forbidden)
        if called:
            raise Reject("check", f"calls the reference op {called[0]!r} at run time")
        problem = judge_trials(task, case.expected, trials, workload.name)
        if problem:
            raise Reject("check", problem)
        interpreted |= bool(reply.get("interpreted"))
    return interpreted
