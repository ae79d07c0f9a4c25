"""Measured search spaces: each configuration of a task's knob space judged by the real guard, kept to be replayed.

The method of Kernel Tuner's cache files and simulation mode, BAT and TenSet: a space is measured once, with
its samples, and every search study after that is a lookup (``replay_pool.ReplayPool``). A dataset is a JSON
Lines file of two kinds of rows:

- ``machine``: a ``MachineSignature`` (CPU model, a hash of its feature flags, usable cores, the threads timed
  at, the C compiler, kernelkiln's and torch's versions) under its ``key``;
- ``measurement``: one judgement of one configuration (``Measurement``): the task, its settings, the round (a
  configuration is judged once per round, rounds in separate passes over the space, so its samples come from
  different processes at different times), the guard's verdict, and per workload the kept rounds' paired
  log-ratios of the reference's time to the candidate's.

Rows are only ever appended, so an interrupted measurement resumes where it stopped. A study uses one
machine's rows: measurements of different machines are never mixed in one space.
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from kernelkiln import __version__
from kernelkiln.errors import UserError
from kernelkiln.task import Task
from kernelkiln.task import knobs as K


class MachineSignature(BaseModel):
    """What a measured space's figures depend on, besides the task and its settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["machine"] = "machine"
    cpu: str
    features: str  # sha256 of the CPU's identity line (model and feature flags), first 16 hex digits
    cores: int  # usable cores
    threads: int  # the threads every worker was timed at
    compiler: str  # the first line of the C compiler's --version
    kernelkiln: str
    torch: str

    @property
    def key(self) -> str:
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @classmethod
    def here(cls, threads: int) -> MachineSignature:
        """This machine's signature, timing at ``threads``."""
        import torch

        from kernelkiln.native.toolchain import CompilerNotFound, cpu_identity, find_compiler
        from kernelkiln.platforms.host import usable_cores
        from kernelkiln.platforms.machine import cpu_name

        try:
            compiler = find_compiler("c").version.splitlines()[0]
        except CompilerNotFound:
            compiler = "none"
        return cls(
            cpu=cpu_name(),
            features=hashlib.sha256(cpu_identity().encode()).hexdigest()[:16],
            cores=usable_cores(),
            threads=threads,
            compiler=compiler,
            kernelkiln=__version__,
            torch=torch.__version__.split("+")[0] + f" ({platform.machine()})",
        )


class Space(BaseModel):
    """A task's space as measured on one machine: the seed its settings apply to, and how much of it was planned."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["space"] = "space"
    machine: str
    task: str
    seed: str  # the seed's text
    size: int  # configurations in the whole space
    planned: int  # of them, measured (all when the space is measured whole)


class WorkloadSamples(BaseModel):
    """One workload's kept timing rounds: log(reference time / candidate time) per round, and the medians."""

    model_config = ConfigDict(extra="forbid")

    name: str
    log_ratios: list[float]
    t_ref_s: float
    t_cand_s: float


class Measurement(BaseModel):
    """One configuration of one task, judged once by the real guard against the reference."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["measurement"] = "measurement"
    machine: str  # MachineSignature.key
    task: str  # Task.id
    task_sha: str  # of the task file's text: a changed task is not replayed from stale rows
    seed_sha: str  # of the seed the settings are applied to
    config: str  # knobs.key(settings)
    settings: dict[str, object]
    seed: bool = False  # these settings are the seed's own
    round: int
    verdict: str
    stage: str
    reason: str
    correct: bool
    timed: bool
    margin: float | None = None  # the guard's noise band, in log-speedup
    workloads: list[WorkloadSamples] = []
    seconds: float  # the guard's whole evaluation (builds cold in round 0)

    @property
    def speedup(self) -> float | None:
        """The guard's figure over the reference: geometric mean of the workloads' median ratios."""
        if not (self.timed and self.workloads):
            return None
        return math.exp(statistics.fmean(statistics.median(w.log_ratios) for w in self.workloads))


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def task_sha(task: Task) -> str:
    """The task's file text with its overrides: what a space's figures were measured on."""
    return sha(task.source + json.dumps(task.overrides, sort_keys=True, default=repr))


class Dataset:
    """A measured-spaces file: its machines and measurements, appended to as they are made."""

    def __init__(self, path: Path):
        self.path = path
        self.machines: dict[str, MachineSignature] = {}
        self.space_records: dict[tuple[str, str], Space] = {}  # by (machine, task)
        self.rows: list[Measurement] = []
        if path.exists():
            self._load()

    def _load(self) -> None:
        try:
            lines = self.path.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"cannot read dataset {self.path}: {exc}") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if data.get("kind") == "machine":
                    machine = MachineSignature.model_validate(data)
                    self.machines[machine.key] = machine
                elif data.get("kind") == "space":
                    space = Space.model_validate(data)
                    self.space_records[(space.machine, space.task)] = space
                else:
                    self.rows.append(Measurement.model_validate(data))
            except (json.JSONDecodeError, ValidationError, AttributeError) as exc:
                first = str(exc).splitlines()[0]
                raise UserError(f"{self.path} line {number} is not a dataset row: {first}") from None

    def add_machine(self, machine: MachineSignature) -> None:
        if machine.key not in self.machines:
            self.machines[machine.key] = machine
            self._append(machine.model_dump_json())

    def add_space(self, space: Space) -> None:
        """Record (again, when it changed) the seed and plan a task's measurements on a machine follow."""
        if self.space_records.get((space.machine, space.task)) != space:
            self.space_records[(space.machine, space.task)] = space
            self._append(space.model_dump_json())

    def add(self, row: Measurement) -> None:
        if row.machine not in self.machines:
            raise ValueError(f"machine {row.machine} is not in {self.path}: add_machine first")
        self.rows.append(row)
        self._append(row.model_dump_json())

    def _append(self, line: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as handle:
            handle.write(line + "\n")

    def one_machine(self, machine: str | None = None) -> str:
        """The machine a study replays: ``machine`` (a key), or the dataset's only one; a one-line error else."""
        measured = sorted({r.machine for r in self.rows})
        if machine is not None:
            if machine not in measured:
                raise UserError(f"{self.path} has no measurements of machine {machine} (it has: {', '.join(measured)})")
            return machine
        if not measured:
            raise UserError(f"{self.path} holds no measurements: run `kiln measure TASK --out {self.path}` first")
        if len(measured) > 1:
            described = "; ".join(_describe(self.machines, k) for k in measured)
            raise UserError(f"{self.path} mixes {len(measured)} machines ({described}): name one with --machine")
        return measured[0]

    def spaces(self, machine: str) -> dict[str, dict[str, list[Measurement]]]:
        """Per task id, per configuration key: that machine's measurements, in round order."""
        out: dict[str, dict[str, list[Measurement]]] = defaultdict(lambda: defaultdict(list))
        for row in sorted((r for r in self.rows if r.machine == machine), key=lambda r: r.round):
            out[row.task][row.config].append(row)
        return {task: dict(configs) for task, configs in out.items()}

    def done(self, machine: str) -> set[tuple[str, str, int]]:
        """(task, configuration, round) already measured on ``machine``."""
        return {(r.task, r.config, r.round) for r in self.rows if r.machine == machine}


def configuration(code: str) -> tuple[str, K.Settings]:
    """The knob settings ``code`` is written at, and their key."""
    settings = K.settings_of(K.read_knobs(code))
    return K.key(settings), settings


def _describe(machines: dict[str, MachineSignature], key: str) -> str:
    machine = machines.get(key)
    return f"{key}: {machine.cpu}, {machine.threads} thread(s)" if machine else key
