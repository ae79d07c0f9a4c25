"""KernelBench-format tasks: a reference ``Model``, its inputs and its workloads."""

from kernelkiln.task.loader import load_task, parse_overrides
from kernelkiln.task.model import Task, Tolerance, Workload
from kernelkiln.task.suite import Suite, bundled_suites, load_suite

__all__ = [
    "Suite",
    "Task",
    "Tolerance",
    "Workload",
    "bundled_suites",
    "load_suite",
    "load_task",
    "parse_overrides",
]
