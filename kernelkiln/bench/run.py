"""A benchmark: the optimizer over a suite, K times, and the field's metrics over each run.

Each repeat is one optimizer run over the whole suite with memory on (later tasks learn
from earlier ones, as in real use), on a store of its own unless one is given and with
its own random seed, so repeats are independent trajectories. torch.compile's ratio to eager is measured once
per task before the runs, so it never competes with the guard for the machine.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from kernelkiln.bench.baseline import compile_ratio
from kernelkiln.bench.metrics import TaskFigures, summarize
from kernelkiln.errors import UserError
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.observer import Observer
from kernelkiln.orchestrator.results import incumbent
from kernelkiln.orchestrator.run import Optimizer, TaskSpec, order_tasks
from kernelkiln.orchestrator.starts import NoStart, starting_code
from kernelkiln.orchestrator.task_run import task_id_of
from kernelkiln.platforms import get_platform
from kernelkiln.platforms.host import fit_threads
from kernelkiln.platforms.sol import Achieved, achieved, over_workloads, sol_bound_s, sol_fraction
from kernelkiln.stats import geomean
from kernelkiln.store import open_store
from kernelkiln.store.records import Attempt, Measurement
from kernelkiln.task import Task, Workload, load_task


def _measured(task: Task, best: Attempt) -> list[tuple[Workload | None, float | None, Measurement]]:
    """Each of the best's measurements with its workload and the candidate's time in seconds."""
    by_name = {w.name: w for w in task.workloads}
    return [(by_name.get(m.workload), m.t_cand_ms / 1e3 if m.t_cand_ms else None, m) for m in best.measurements]


def best_sol(task: Task, best: Attempt | None, peaks) -> float | None:
    """The best candidate's speed-of-light fraction, a geometric mean over workloads (None when unknown)."""
    if best is None:
        return None
    fractions = []
    for w, seconds, m in _measured(task, best):
        bound = sol_bound_s(w.flops, w.bytes, peaks) if w is not None else None
        fraction = m.sol_fraction or sol_fraction(bound, seconds)
        if fraction is None:
            return None
        fractions.append(fraction)
    return geomean(fractions)


def best_rate(task: Task, best: Attempt | None, peaks) -> Achieved | None:
    """What the best candidate reached on its bounding term (GB/s or GFLOP/s, a geometric mean over
    workloads); None when unknown or when the workloads are bound by different terms."""
    if best is None:
        return None
    return over_workloads(
        [achieved(w.flops, w.bytes, seconds, peaks) if w else None for w, seconds, _ in _measured(task, best)]
    )


def task_figures(
    task: Task, attempts: list[Attempt], ratio: float | None, peaks, confirmed: float | None = None
) -> TaskFigures:
    """One task's figures from its attempts in one run (``confirmed``: the best's confirmed speedup)."""
    best = incumbent(attempts)
    first = next((a for a in attempts if a.correct and a.speedup), None)
    return TaskFigures(
        name=task_id_of(task),
        correct=any(a.correct for a in attempts),
        best_speedup=confirmed or (best.speedup if best else None),
        search_speedup=best.speedup if best else None,
        first_correct_speedup=first.speedup if first else None,
        compile_ratio=ratio,
        sol_fraction=best_sol(task, best, peaks),
        reached=best_rate(task, best, peaks),
        evaluations=len(attempts),
        tokens=sum(a.tokens_in + a.tokens_out for a in attempts),
    )


def _mean(values: list) -> Any:
    """The mean of numbers (None ignored), or of dicts key by key."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    if isinstance(present[0], dict):
        return {k: _mean([v.get(k) for v in present]) for k in present[0]}
    if isinstance(present[0], bool):
        return sum(present) / len(present)
    if isinstance(present[0], int | float):
        return statistics.fmean(present)
    return present[0]


class Bench:
    """Runs ``kiln bench``."""

    def __init__(
        self,
        out_dir: Path,
        store_url: str | None = None,
        observer: Observer | None = None,
        compile_baseline: bool = True,
        progress=print,
    ):
        self.out_dir, self.store_url, self.observer = out_dir, store_url, observer
        self.compile_baseline, self.progress = compile_baseline, progress

    def run(
        self, paths: list[Path], config: OptimizeConfig, repeat: int, sizes: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Every repeat's figures, their means at the top level, written to DIR/bench.json too; ``sizes``: per
        path, the size overrides it runs at (``--set``, ``--shrink``)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        sizes = sizes or [{} for _ in paths]
        tasks = order_tasks([load_task(p, o) for p, o in zip(paths, sizes, strict=True)])
        overridden = {str(t.path): t.overrides for t in tasks}
        skipped, kept = {}, []
        for task in tasks:
            try:
                starting_code(task, config)
                kept.append(task)
            except NoStart as exc:  # the tuner without a seed for it: the figures cover the others
                skipped[task_id_of(task)] = str(exc).removeprefix(f"{task.path}: ")
                self.progress(f"{task.name}: skipped: {skipped[task_id_of(task)]}")
        tasks = kept
        if not tasks:
            raise UserError(
                f"no task of the suite can be optimized with the {config.policy.kind} policy: "
                + next(iter(skipped.values()), "the suite is empty")
            )
        threads = fit_threads(config.guard.threads)[0]
        ratios: dict[str, float | None] = {}
        notes: dict[str, str] = {}
        for task in tasks:
            if self.compile_baseline and config.cluster.address != "local":
                ratios[task.name], notes[task.name] = (
                    None,
                    ("not measured: on a cluster, candidates are timed on its devices, not on this machine"),
                )
            elif self.compile_baseline:
                self.progress(f"{task.name}: timing torch.compile against eager")
                ratios[task.name], notes[task.name] = compile_ratio(task, threads)
            else:
                ratios[task.name], notes[task.name] = None, "not measured (--no-compile)"
        peaks = get_platform(config.platform).peaks(threads)
        runs = []
        for k in range(repeat):
            url = self.store_url or f"sqlite:///{(self.out_dir / f'repeat-{k + 1}.db').resolve()}"
            memory = Memory(open_store(url, config.store))
            result = Optimizer(memory, self.out_dir, self.observer).start(  # repeat k: the tuner's seed k
                [TaskSpec(str(t.path), overridden[str(t.path)]) for t in tasks],
                config.model_copy(update={"policy": config.policy.for_repeat(k)}),
                self.out_dir / f"repeat-{k + 1}",
            )
            with memory.store.read() as conn:
                attempts = memory.store.attempts.for_run(conn, result.run_id)
            figures = [
                task_figures(
                    t,
                    [a for a in attempts if a.task_id == task_id_of(t)],
                    ratios[t.name],
                    peaks,
                    result.tasks[task_id_of(t)].confirmed_speedup,
                )
                for t in tasks
            ]
            runs.append(
                {
                    "run_id": result.run_id,
                    "status": result.status,
                    "store": url,
                    "out": str((self.out_dir / f"repeat-{k + 1}").resolve()),
                    **summarize(figures),
                }
            )
        top = {key: _mean([r[key] for r in runs]) for key in runs[0] if key not in ("run_id", "status", "store", "out")}
        out = {
            **top,
            "tasks_run": len(tasks),
            "skipped": skipped,
            "repeats": runs,
            "compile_notes": {k: v for k, v in notes.items() if v},
            "peaks": peaks.source,
            "budget": config.budget,
            "agents": config.agents,
            "policy": config.policy.kind,
        }
        (self.out_dir / "bench.json").write_text(json.dumps(out, indent=2) + "\n")
        return out
