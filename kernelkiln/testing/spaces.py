"""Measured-spaces datasets made up for tests: known figures, no guard."""

from __future__ import annotations

import json
import math
from pathlib import Path

from kernelkiln.evaluation.spaces import Dataset, MachineSignature, Measurement, Space, WorkloadSamples, sha, task_sha
from kernelkiln.task import Task
from kernelkiln.task import knobs as K

MACHINE = MachineSignature(
    cpu="Test CPU", features="0" * 16, cores=2, threads=1, compiler="gcc test", kernelkiln="0", torch="0"
)


def made_up(path: Path, task: Task, seed: str, figures: dict[str, float], margin: float = 0.03) -> Dataset:
    """A dataset of ``task``'s space on ``MACHINE``: each configuration (by ``knobs.key``) at the figure over the
    reference given, every round within a fraction of a percent of it, two rounds each."""
    own = K.key(K.settings_of(K.read_knobs(seed)))
    dataset = Dataset(path)
    dataset.add_machine(MACHINE)
    dataset.add_space(Space(machine=MACHINE.key, task=task.id, seed=seed, size=len(figures), planned=len(figures)))
    for rnd in range(2):
        for key, figure in figures.items():
            settings = json.loads(key)
            ratios = [math.log(figure) + 0.002 * ((i % 3) - 1) for i in range(9)]
            dataset.add(
                Measurement(
                    machine=MACHINE.key,
                    task=task.id,
                    task_sha=task_sha(task),
                    seed_sha=sha(seed),
                    config=K.key(settings),
                    settings=settings,
                    seed=key == own,
                    round=rnd,
                    verdict="KEEP" if figure > 1 + margin else "REVERT" if figure < 1 - margin else "ACCEPT",
                    stage="verdict",
                    reason="made up",
                    correct=True,
                    timed=True,
                    margin=margin,
                    workloads=[WorkloadSamples(name="w0", log_ratios=ratios, t_ref_s=1e-3, t_cand_s=1e-3 / figure)],
                    seconds=2.0,
                )
            )
    return dataset
