"""How the run's scheduler and store keep 1, 4, 16 and 64 devices busy: simulated devices, real everything else.

    python benchmarks/cluster_scaling.py [--json] [--devices 1,4,16,64] [--duration S] [--budget N]
                                         [--backend ray|threads] [--suite kb-cpu] [--store-url URL]

This machine has two cores, so the devices are simulated: each holds a candidate for a known
``--duration`` and returns a verdict fixed by the candidate's code. Everything else is what a
cluster run uses:
- the Optimizer with 8 tuner agents per task, and as many tasks at once as the devices call for
  (devices / agents);
- ``--backend ray`` (default): the real RayPool over a local Ray instance, one simulated actor
  per device (a Ray process each), so every candidate travels through Ray as on a cluster;
  ``--backend threads``: the same device queue with simulated devices in this process;
- one search loop hands every agent's candidate to the pool and waits on their futures;
- memory's callbacks and a SQLite store per size (``--store-url`` for PostgreSQL).
The tasks are the suite's that 8 agents (lenses) suit, easiest first. With D devices a run has
2·D/8 of them (two rounds of D/8 tasks at once; one task below 8 devices), copied under new
names where the suite has fewer.

Reported per size:
- evaluations per minute;
- scheduler overhead per evaluation: an evaluation's round trip on the driver, less the device's
  time on it and its wait for a free device (the queue, Ray's dispatch and its reply);
- queue wait per evaluation: how long a candidate waited for a free device;
- agent turn: the driver's time from an agent's verdict stored to its next candidate submitted
  (the next turn's context, the tuner's proposal), mean and p95;
- store write latency p95: memory's transaction after each verdict;
- device idle share: 1 - (time devices held candidates) / (devices x wall time). It is given over
  the whole run, and until the last task starts: after that a finite suite only winds down, and
  its last tasks' final rounds and confirmations leave devices free that no task is left to use.
The target at 64 devices: idle share <= 10%, overhead <= 50 ms per evaluation.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelkiln.memory.callbacks import MemoryCallbacks
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.observer import Observer
from kernelkiln.orchestrator.run import Optimizer, TaskSpec, order_tasks
from kernelkiln.policy.lens import eligible_lenses
from kernelkiln.store import open_store
from kernelkiln.task import load_suite, load_task
from kernelkiln.testing.simulated_pool import SimulatedPool

AGENTS = 8


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 2 else (values[0] if values else 0.0)


def _timed_writes() -> list[float]:
    """Time memory's after-verdict callback (its one transaction per verdict), on the class: a run
    configures its own Memory."""
    times: list[float] = []
    real = MemoryCallbacks.after_verdict

    def timed(self, result):
        start = time.perf_counter()
        real(self, result)
        times.append(time.perf_counter() - start)

    timed.__wrapped__ = real
    MemoryCallbacks.after_verdict = timed
    return times


class _Watch(Observer):
    """When tasks start, and each agent's turns: its verdict stored, its next candidate submitted (time.time())."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.turns: list[float] = []
        self._stored: dict[tuple[str, str], float] = {}

    def task_started(self, task_id, budget, done, agents) -> None:
        self.starts.append(time.time())

    def evaluating(self, task_id, agent, summary) -> None:
        stored = self._stored.pop((task_id, agent), None)
        if stored is not None:
            self.turns.append(time.time() - stored)

    def after_verdict(self, result) -> None:
        self._stored[(result.attempt.task_id, result.attempt.agent)] = time.time()


class _Recorded:
    """A pool whose evaluations are timed on the driver, submitted to completed (the Optimizer leaves it open)."""

    def __init__(self, pool) -> None:
        self.pool, self.device_kind = pool, pool.device_kind
        self.round_trips: list[float] = []

    def submit(self, inputs):
        futures = self.pool.submit(inputs)
        called = time.time()
        for future in futures:
            future.add_done_callback(lambda _, called=called: self.round_trips.append(time.time() - called))
        return futures

    def native_requests(self, task, guard, source):
        return self.pool.native_requests(task, guard, source)

    def build_as_sandbox(self, task, guard, request):
        return self.pool.build_as_sandbox(task, guard, request)

    def tasks_at_once(self, agents: int) -> int:
        return self.pool.tasks_at_once(agents)

    def release(self, task) -> None:
        self.pool.release(task)


def _pool(backend: str, devices: int, duration: float):
    """The pool and a function giving its devices' (start, end) intervals, time.time()."""
    if backend == "threads":
        pool = SimulatedPool(devices, duration)
        return pool, lambda: [(c.started, c.ended) for c in pool.calls]
    import ray

    from kernelkiln.evaluation.config import ClusterConfig
    from kernelkiln.evaluation.ray_pool import RayPool
    from kernelkiln.testing.simulated_pool import simulated_actor

    ray.init(num_cpus=devices, include_dashboard=False, log_to_driver=False, configure_logging=False)
    pool = RayPool(
        ClusterConfig(address="ray", cpus_per_device=1),
        "cpu",
        "sqlite:///unused",
        actor_class=simulated_actor(duration),
    )
    return pool, lambda: [
        span for logs in ray.get([d.handle.evaluations.remote() for d in pool.queue.devices]) for span in logs
    ]


def measure(
    backend: str, devices: int, duration: float, budget: int, tasks: list[Path], store_url: str, out: Path
) -> dict:
    pool, spans_of = _pool(backend, devices, duration)
    recorded = _Recorded(pool)
    memory = Memory(open_store(store_url))
    writes = _timed_writes()
    config = OptimizeConfig(agents=AGENTS, budget=budget, confirm_time_budget_s=1.0)
    watch = _Watch()
    try:
        result = Optimizer(memory, out, watch, pool=recorded).start([TaskSpec(str(p), {}) for p in tasks], config, out)
        spans, waited = spans_of(), pool.queue.stats().waited_s
    finally:
        memory.store.close()
        MemoryCallbacks.after_verdict = MemoryCallbacks.__dict__["after_verdict"].__wrapped__
        pool.close()
    first, last = min(a for a, _ in spans), max(b for _, b in spans)
    wall, busy = last - first, sum(b - a for a, b in spans)
    drain = max(watch.starts)  # the last task began: from here on the suite only winds down
    steady = sum(max(0.0, min(drain, b) - a) for a, b in spans)
    calls, turns = recorded.round_trips, watch.turns
    round_trip = statistics.fmean(calls)
    return {
        "backend": backend,
        "devices": devices,
        "tasks": len(tasks),
        "tasks_at_once": pool.tasks_at_once(AGENTS),
        "evaluations": len(calls),
        "attempts_stored": sum(t.attempts for t in result.tasks.values()),
        "wall_s": wall,
        "evaluations_per_minute": len(calls) / wall * 60,
        "scheduler_overhead_ms": (round_trip - busy / len(spans) - waited / len(calls)) * 1e3,
        "queue_wait_ms_mean": waited / len(calls) * 1e3,
        "agent_turn_ms_mean": statistics.fmean(turns) * 1e3 if turns else None,
        "agent_turn_ms_p95": _p95(turns) * 1e3 if turns else None,
        "store_write_ms_p95": _p95(writes) * 1e3,
        "store_write_ms_median": statistics.median(writes) * 1e3,
        "idle_share": 1 - busy / (devices * wall),
        "idle_share_until_last_task": 1 - steady / (devices * (drain - first)) if drain > first else None,
    }


def _copies(tasks: list, count: int, folder: Path) -> list[Path]:
    """``count`` task files: the suite's, then copies under new names (a task is known by its file's name)."""
    folder.mkdir(parents=True)
    paths = []
    for i in range(count):
        task = tasks[i % len(tasks)]
        path = folder / f"{task.path.stem}{'' if i < len(tasks) else f'_copy{i // len(tasks)}'}.py"
        shutil.copy(task.path, path)
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="1,4,16,64", help="Simulated device counts (comma-separated).")
    parser.add_argument(
        "--duration",
        type=float,
        default=8.0,
        help="Seconds each evaluation holds its device (default: the search's timing budget).",
    )
    parser.add_argument("--budget", type=int, default=32, help="Evaluations per task.")
    parser.add_argument("--suite", default="kb-cpu", help="The suite whose tasks (easiest first) are run.")
    parser.add_argument("--store-url", help="One store for every size (default: a fresh SQLite file per size).")
    parser.add_argument(
        "--backend",
        choices=("ray", "threads"),
        default="ray",
        help="ray: the real RayPool over a local Ray instance, one simulated actor per device "
        "(needs kernelkiln[ray]); threads: simulated devices in this process (no Ray).",
    )
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    args = parser.parse_args()
    sizes = [int(n) for n in args.devices.split(",")]
    tasks = order_tasks(
        [
            t
            for t in (load_task(p) for p in load_suite(args.suite).task_paths())
            if len(eligible_lenses(t.op_family)) >= AGENTS
        ]
    )
    if not tasks:
        parser.error(f"suite {args.suite} has no task that {AGENTS} agents (lenses) suit")
    rows = []
    with tempfile.TemporaryDirectory(prefix="kiln-scaling-") as tmp:
        for devices in sizes:
            count = 1 if devices < AGENTS else 2 * math.ceil(devices / AGENTS)  # two rounds of tasks at once
            paths = _copies(tasks, count, Path(tmp) / f"tasks-{devices}")
            url = args.store_url or f"sqlite:///{Path(tmp) / f'd{devices}.db'}"
            print(
                f"{devices} device(s): {count} task(s) x {args.budget} evaluations of {args.duration:g} s",
                file=sys.stderr,
                flush=True,
            )
            rows.append(
                measure(args.backend, devices, args.duration, args.budget, paths, url, Path(tmp) / f"d{devices}")
            )
    figures = {"duration_s": args.duration, "budget": args.budget, "agents_per_task": AGENTS, "sizes": rows}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"{'devices':>7} {'tasks':>5} {'evals':>5} {'evals/min':>9} {'sched ms':>8} {'wait ms':>8} "
        f"{'turn ms (p95)':>14} {'store p95 ms':>12} {'idle':>6} {'idle until last task':>21}"
    )
    for r in rows:
        print(
            f"{r['devices']:>7} {r['tasks']:>5} {r['evaluations']:>5} {r['evaluations_per_minute']:>9.1f} "
            f"{r['scheduler_overhead_ms']:>8.1f} {r['queue_wait_ms_mean']:>8.1f} "
            f"{r['agent_turn_ms_mean'] or 0:>6.0f} ({r['agent_turn_ms_p95'] or 0:>5.0f}) "
            f"{r['store_write_ms_p95']:>12.1f} {r['idle_share']:>6.1%} {r['idle_share_until_last_task'] or 0:>21.1%}"
        )


if __name__ == "__main__":
    main()
