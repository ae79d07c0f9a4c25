"""An ablation's units of work: tasks optimized in order on stores, as an arm's memory mode says.

A unit is one arm's memory mode at one repeat, and gives every task's trajectories (its
evaluations in order, see ``figures.Step``) by pass, each with its role: ``measured`` (it counts
for the arm) or ``build`` (it only fills the store the measured tasks learn from). The crossfit unit keeps the
stores its halves built (``A.db``, ``B.db``, and ``AB.db``: the whole first pass), which the
read-only and reuse units of the same repeat take (copies: nothing they do reaches them).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from kernelkiln.bench.figures import Step
from kernelkiln.evaluation.pool import EvaluationPool
from kernelkiln.llm.client import ChatClient
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.observer import Observer
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.orchestrator.task_run import task_id_of
from kernelkiln.store import open_store
from kernelkiln.store.store import Store
from kernelkiln.store.transfer import import_records, iter_records
from kernelkiln.task import Task

ClientFor = Callable[[Task], ChatClient | None]  # a scripted model for a task (the context study), else None


def halves(tasks: list[Task]) -> tuple[list[Task], list[Task]]:
    """Two halves with every op family in both where it has two tasks or more (each family's tasks dealt in
    turn, the dealing continuing across families), each in the given order."""
    side: dict[str, int] = {}
    turn = 0
    for family in dict.fromkeys(t.op_family or "" for t in tasks):
        for task in [t for t in tasks if (t.op_family or "") == family]:
            side[task_id_of(task)] = turn % 2
            turn += 1
    return ([t for t in tasks if side[task_id_of(t)] == 0], [t for t in tasks if side[task_id_of(t)] == 1])


Split = Literal["task", "family"]


def held_out_groups(tasks: list[Task], split: Split) -> list[list[Task]]:
    """The groups a held-out study measures in turn: each task alone, or each op family's tasks."""
    if split == "task":
        return [[t] for t in tasks]
    families = dict.fromkeys(t.op_family or t.name for t in tasks)
    return [[t for t in tasks if (t.op_family or t.name) == f] for f in families]


def _identity(task: Task) -> str:
    """What makes two tasks identical: the same reference file text at the same sizes."""
    return hashlib.sha256((task.source + repr(sorted(task.overrides.items()))).encode()).hexdigest()


class Units:
    """Runs units under ``root`` (one folder per unit), with the optimizer's observer."""

    def __init__(
        self, root: Path, observer: Observer | None, client_for: ClientFor, pool: EvaluationPool | None = None
    ):
        """``pool``: where every evaluation is judged (None: where the config's cluster says)."""
        self.root, self.observer, self.client_for, self.pool = root, observer, client_for, pool

    def _store(self, path: Path) -> Store:
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in path.parent.glob(f"{path.name}*"):
            stale.unlink()  # a unit interrupted earlier starts over
        # A fresh store is a copy of one created once: creating its schema costs more than a replayed run's search.
        template = self.root / "empty-store.db"
        if not template.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            partial = self.root / f"empty-store.{os.getpid()}.tmp"
            open_store(f"sqlite:///{partial.resolve()}").close()
            partial.replace(template)
        shutil.copy(template, path)
        return open_store(f"sqlite:///{path.resolve()}")

    def _optimize(self, memory: Memory, task: Task, config: OptimizeConfig, out: Path) -> tuple[list[Step], float]:
        started = time.perf_counter()
        result = Optimizer(memory, out, self.observer, client=self.client_for(task), pool=self.pool).start(
            [TaskSpec(str(task.path), task.overrides)], config, out / task.name
        )
        with memory.store.read() as conn:
            attempts = memory.store.attempts.for_run(conn, result.run_id)
        steps = [
            Step(
                a.case.code_hash,
                a.verdict,
                a.speedup if a.correct else None,
                sum(c[0] for c in a.case.calls),
                max((c[0] for c in a.case.calls), default=0),
            )
            for a in attempts
        ]
        return steps, time.perf_counter() - started

    def empty(self, key: str, tasks: list[Task], config: OptimizeConfig) -> dict:
        """Each task on a fresh store of its own."""
        out = self.root / key
        result = {}
        for task in tasks:
            memory = Memory(self._store(out / f"{task.name}.db"))
            steps, seconds = self._optimize(memory, task, config, out)
            memory.store.close()
            result[task_id_of(task)] = {"-": _entry("measured", steps, seconds)}
        return result

    def crossfit(self, key: str, tasks: list[Task], config: OptimizeConfig) -> dict:
        """Half A builds a store, half B is measured on it (still learning); then the other way round."""
        out = self.root / key
        a, b = halves(tasks)
        result: dict[str, dict[str, dict]] = {}
        for first, second, name in ((a, b, "A"), (b, a, "B")):
            memory = Memory(self._store(out / f"pass-{name}.db"))
            for task in first:
                steps, seconds = self._optimize(memory, task, config, out / f"pass-{name}")
                result.setdefault(task_id_of(task), {})[name] = _entry("build", steps, seconds)
            _snapshot(memory.store, out / f"{name}.db")
            for task in second:
                steps, seconds = self._optimize(memory, task, config, out / f"pass-{name}")
                result.setdefault(task_id_of(task), {})[name] = _entry("measured", steps, seconds)
            if name == "A":
                _snapshot(memory.store, out / "AB.db")
            memory.store.close()
        return result

    def held_out(self, key: str, tasks: list[Task], config: OptimizeConfig, split: Split, built: Path) -> dict:
        """Each group of ``split`` measured on a store holding the empty-store runs (``built``: that unit's
        folder, a store per task) of every task outside the group (``task``: each task alone, leave-one-task-out;
        ``family``: its op family) and of no task identical to one in it; each member on a copy of that store.

        Those runs learned nothing from each other, so nothing of a held-out task reaches its store through
        another task's run; and n tasks cost n runs, not the n x (n - 1) of building a store per group by
        optimizing the others in turn. A group's store is kept in ``built`` for the other arms of the repeat.
        """
        out = self.root / key
        out.mkdir(parents=True, exist_ok=True)
        result: dict[str, dict[str, dict]] = {}
        groups = held_out_groups(tasks, split)
        _HeldOutStores(self, tasks, groups, built, split).build()
        for n, group in enumerate(groups):
            shared = built / f"held-{split}-{n}.db"
            for task in group:
                path = out / f"held-{n}-{task.name}.db"
                for stale in out.glob(f"{path.name}*"):
                    stale.unlink()
                shutil.copy(shared, path)
                memory = Memory(open_store(f"sqlite:///{path.resolve()}"))
                steps, seconds = self._optimize(memory, task, config, out / f"held-{n}")
                memory.store.close()
                for done in out.glob(f"{path.name}*"):  # nothing reads it again: at 36 tasks, 150 MB a unit
                    done.unlink()
                result.setdefault(task_id_of(task), {})["-"] = _entry("measured", steps, seconds)
        return result

    def readonly(self, key: str, tasks: list[Task], config: OptimizeConfig, built: Path) -> dict:
        """Each task measured with the store the other half built lent read-only (``built``: the crossfit unit)."""
        out = self.root / key
        a, b = halves(tasks)
        result = {}
        for half, lent_from in ((b, "A"), (a, "B")):
            lent = open_store(f"sqlite:///{(built / f'{lent_from}.db').resolve()}", readonly=True)
            for task in half:
                memory = Memory(self._store(out / f"{task.name}.db"), lent=lent)
                steps, seconds = self._optimize(memory, task, config, out)
                memory.store.close()
                result[task_id_of(task)] = {"-": _entry("measured", steps, seconds)}
            lent.close()
        return result

    def reuse(self, key: str, tasks: list[Task], config: OptimizeConfig, built: Path) -> dict:
        """Every task again, in the first pass's order, on a copy of the store that pass left."""
        out = self.root / key
        a, b = halves(tasks)
        path = out / "store.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in out.glob("store.db*"):
            stale.unlink()
        shutil.copy(built / "AB.db", path)
        memory = Memory(open_store(f"sqlite:///{path.resolve()}"))
        result = {}
        for task in a + b:
            steps, seconds = self._optimize(memory, task, config, out)
            result[task_id_of(task)] = {"-": _entry("measured", steps, seconds)}
        memory.store.close()
        return result


class _HeldOutStores:
    """Every group's held-out store in ``built`` (``held-{split}-{n}.db``): the empty-store runs of every task
    outside the group and identical to none in it.

    Built by halving the groups: the store of all tasks outside a block of groups, with the other half's tasks
    imported, is the store outside each half; so each task's runs are imported about log2(groups) times, not
    once per other group (at 36 tasks, 187 imports a repeat instead of 1,260: importing was 58% of a replay).
    A group with a task identical to one outside it gets its store built directly, without those.
    """

    def __init__(self, units: Units, tasks: list[Task], groups: list[list[Task]], built: Path, split: Split):
        self.units, self.tasks, self.groups, self.built, self.split = units, tasks, groups, built, split
        self.records: dict[str, list] = {}

    def build(self) -> None:
        if all(self._target(n).exists() for n in range(len(self.groups))):
            return
        self._halve(list(range(len(self.groups))), None)

    def _target(self, n: int) -> Path:
        return self.built / f"held-{self.split}-{n}.db"

    def _halve(self, block: list[int], base: Path | None) -> None:
        """Make the stores of ``block``'s groups from ``base``, a store of every task outside the block."""
        if len(block) == 1:
            (n,) = block
            group = self.groups[n]
            inside = {task_id_of(t) for t in group} | {_identity(t) for t in group}
            others = [t for t in self.tasks if task_id_of(t) not in inside and _identity(t) not in inside]
            if len(others) + len(group) == len(self.tasks) and base is not None:
                self._publish(base, n)
            else:
                direct = self._with(None, others, f"{n}")
                self._publish(direct, n)
                direct.unlink()
            return
        half = len(block) // 2
        for inner, outer in ((block[:half], block[half:]), (block[half:], block[:half])):
            if all(self._target(n).exists() for n in inner):
                continue
            name = f"{inner[0]}-{inner[-1]}"
            store = self._with(base, [t for n in outer for t in self.groups[n]], name)
            self._halve(inner, store)
            for stale in self.built.glob(f"{store.name}*"):
                stale.unlink()

    def _with(self, base: Path | None, tasks: list[Task], name: str) -> Path:
        """A store file: ``base``'s records (none: empty) and ``tasks``' runs."""
        path = self.built / f"held-{self.split}-tmp-{name}.db"
        if base is None:
            store = self.units._store(path)
        else:
            shutil.copy(base, path)
            store = open_store(f"sqlite:///{path.resolve()}")
        for task in tasks:
            if task.name not in self.records:
                lent = open_store(f"sqlite:///{(self.built / f'{task.name}.db').resolve()}", readonly=True)
                self.records[task.name] = list(iter_records(lent))
                lent.close()
            import_records(store, self.records[task.name])
        _snapshot(store, path.with_suffix(".snap"))
        store.close()
        for stale in self.built.glob(f"{path.name}*"):
            stale.unlink()
        path.with_suffix(".snap").replace(path)
        return path

    def _publish(self, store: Path, n: int) -> None:
        if not self._target(n).exists():
            shutil.copy(store, self._target(n).with_suffix(".part"))
            self._target(n).with_suffix(".part").replace(self._target(n))


def _entry(role: str, steps: list[Step], seconds: float) -> dict:
    return {"role": role, "steps": [s.to_list() for s in steps], "seconds": round(seconds, 1)}


def _snapshot(store: Store, path: Path) -> None:
    """A consistent copy of a SQLite store (its write-ahead log included), through SQLite's backup API."""
    for stale in path.parent.glob(f"{path.name}*"):
        stale.unlink()
    database = store.engine.url.database
    assert database is not None  # a SQLite store: its file
    source = sqlite3.connect(database)
    target = sqlite3.connect(path)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()
