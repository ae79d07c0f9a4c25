"""`kiln measure`: tasks' knob spaces judged by the real guard, configuration by configuration, into a dataset.

A space of at most ``whole_up_to`` configurations is measured whole; a larger one at its seed and a seeded
uniform sample without replacement (``sample`` configurations in all), and a study searches only what was
measured (TenSet's rule: ``replay_pool``). Every configuration is judged once per round against the
reference, rounds in separate passes over every task, so its samples come from different processes at
different times. Rows are appended as they are made: the same command continues an interrupted measurement.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from kernelkiln.errors import UserError
from kernelkiln.evaluation.spaces import (
    Dataset,
    MachineSignature,
    Measurement,
    Space,
    WorkloadSamples,
    sha,
    task_sha,
)
from kernelkiln.guard import GuardSession
from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.measurement.timing import Series
from kernelkiln.guard.verdict import Verdict
from kernelkiln.platforms.host import fit_threads
from kernelkiln.task import Task
from kernelkiln.task import knobs as K

WHOLE_UP_TO = 400
SAMPLE = 300


@dataclass(frozen=True)
class SpacePlan:
    """The configurations of one task to measure, in order (the starting candidate's first)."""

    task: Task
    start: str  # the starting candidate's code
    size: int  # configurations in the whole space
    configs: list[K.Settings]

    @property
    def whole(self) -> bool:
        return len(self.configs) == self.size


def plan_space(task: Task, start: str, whole_up_to: int = WHOLE_UP_TO, sample: int = SAMPLE) -> SpacePlan:
    """Every configuration of ``start``'s knobs, or (more than ``whole_up_to``) its own and a seeded sample."""
    knobs = K.read_knobs(start)
    if not knobs:
        return SpacePlan(task, start, 1, [{}])
    names = [k.name for k in knobs]
    size = math.prod(len(k.options) for k in knobs)
    own = K.settings_of(knobs)
    if size <= whole_up_to:
        every = [dict(zip(names, values, strict=True)) for values in itertools.product(*(k.options for k in knobs))]
        return SpacePlan(task, start, size, [own] + [s for s in every if K.key(s) != K.key(own)])
    rng, chosen = random.Random(f"measure:{task.id}"), {K.key(own): own}
    while len(chosen) < min(sample, size):
        settings = {k.name: rng.choice(k.options) for k in knobs}
        chosen.setdefault(K.key(settings), settings)
    return SpacePlan(task, start, size, list(chosen.values()))


class Recorder:
    """The guard's ``observe``: each workload's kept rounds, as a dataset stores them."""

    def __init__(self) -> None:
        self.workloads: list[WorkloadSamples] = []

    def __call__(self, name: str, series: Series) -> None:
        if series.blind or not series.times.get("ref"):
            return
        self.workloads.append(
            WorkloadSamples(
                name=name,
                log_ratios=[round(x, 6) for x in series.log_ratios("ref", "cand")],
                t_ref_s=statistics.median(series.times["ref"]),
                t_cand_s=statistics.median(series.times["cand"]),
            )
        )


class Measurer:
    """Measures plans into a dataset, round by round, skipping what it already holds for this machine."""

    def __init__(self, dataset: Dataset, guard: GuardConfig, rounds: int = 2, progress: Callable[[str], None] = print):
        # Each round is already a judgement in fresh processes: replicating inside one would time it twice.
        self.guard = guard.model_copy(update={"replicate": "none"})
        self.dataset, self.rounds, self.progress = dataset, rounds, progress
        self.machine = MachineSignature.here(fit_threads(guard.threads)[0])

    def run(self, plans: list[SpacePlan]) -> int:
        """Measure what is missing; the number of judgements made."""
        measured = {r.task: r.task_sha for r in self.dataset.rows}
        for plan in plans:
            if measured.get(plan.task.id, task_sha(plan.task)) != task_sha(plan.task):
                raise UserError(
                    f"{self.dataset.path} holds another task named {plan.task.id} (another file, or this one "
                    "changed since): measure it into another dataset"
                )
        self.dataset.add_machine(self.machine)
        done, made = self.dataset.done(self.machine.key), 0
        total = self.rounds * sum(len(p.configs) for p in plans)
        before = sum(
            1 for p in plans for s in p.configs for r in range(self.rounds) if (p.task.id, K.key(s), r) in done
        )
        for plan in plans:
            space = Space(
                machine=self.machine.key, task=plan.task.id, seed=plan.start, size=plan.size, planned=len(plan.configs)
            )
            self.dataset.add_space(space)
        for rnd in range(self.rounds):
            for plan in plans:
                todo = [s for s in plan.configs if (plan.task.id, K.key(s), rnd) not in done]
                if not todo:
                    continue
                recorder = Recorder()
                with GuardSession(plan.task, self.guard, observe=recorder) as guard:
                    for settings in todo:
                        recorder.workloads = []
                        verdict = guard.evaluate(K.apply(plan.start, settings))
                        self.dataset.add(self._row(plan, settings, rnd, verdict, recorder.workloads))
                        made += 1
                        figure = f"{verdict.speedup:.3f}x" if verdict.speedup is not None else verdict.reason[:60]
                        self.progress(
                            f"[{before + made}/{total}] round {rnd + 1} {plan.task.id} "
                            f"{K.describe(settings) or 'the starting candidate'}: {verdict.verdict} {figure}"
                        )
        return made

    def _row(
        self, plan: SpacePlan, settings: K.Settings, rnd: int, verdict: Verdict, workloads: list[WorkloadSamples]
    ) -> Measurement:
        timed = verdict.timed and bool(workloads)
        return Measurement(
            machine=self.machine.key,
            task=plan.task.id,
            task_sha=task_sha(plan.task),
            seed_sha=sha(plan.start),
            config=K.key(settings),
            settings=settings,
            seed=K.key(settings) == K.key(plan.configs[0]),
            round=rnd,
            verdict=verdict.verdict,
            stage=verdict.stage,
            reason=verdict.reason,
            correct=verdict.correct,
            timed=timed,
            margin=verdict.noise_margin if timed else None,
            workloads=workloads if timed else [],
            seconds=round(verdict.seconds, 4),
        )
