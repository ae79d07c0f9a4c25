"""An evaluation pool whose verdicts come from a measured-spaces dataset (``spaces``) instead of a device.

Kernel Tuner's simulation mode, under kernelkiln's own search loop, tuner, memory and store: a candidate is
one configuration of its task's seed, and its verdict is drawn from that configuration's measurements as the
guard would have given it. Each judgement picks one stored measurement (round) of the candidate, and of the
incumbent when there is one, and bootstraps each workload's kept rounds (their median is the guard's figure);
the two draws decide KEEP, ACCEPT or REVERT against the wider of their two noise bands, with the guard's own
rule (``scoring.decide``). A configuration the dataset does not hold is not guessed at: the run fails and says
so (a space measured as a sample is searched over its measured configurations only). A verdict's ``seconds``
are the measured evaluation's, its builds cold, so a study's time is the time the real runs would have taken.
"""

from __future__ import annotations

import hashlib
import math
import random
import statistics
from collections.abc import Sequence
from concurrent.futures import Future

from kernelkiln import native
from kernelkiln.errors import UserError
from kernelkiln.evaluation.pool import EvaluationInput
from kernelkiln.evaluation.spaces import Dataset, Measurement, configuration, task_sha
from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.measurement.scoring import decide
from kernelkiln.guard.verdict import Verdict, WorkloadResult
from kernelkiln.platforms import Peaks
from kernelkiln.task import Task
from kernelkiln.task import knobs as K
from kernelkiln.task.knobs import KnobError

KIND = "replay"


def draw(row: Measurement, rng: random.Random) -> dict[str, float]:
    """Per workload, a bootstrap draw of the guard's figure: the median of its kept rounds resampled."""
    return {w.name: math.exp(statistics.median(rng.choices(w.log_ratios, k=len(w.log_ratios)))) for w in row.workloads}


def row_verdict(row: Measurement, seconds: float) -> Verdict:
    """An untimed measurement's verdict as it was given (not measured, or correct but untimed)."""
    return Verdict(
        verdict=row.verdict,
        stage=row.stage,
        reason=row.reason,
        correct=row.correct,
        seconds=seconds,
    )


class ReplayPool:
    """Judges candidates by replaying one machine's measured spaces; ``seed`` makes a study's draws repeatable."""

    def __init__(self, dataset: Dataset, machine: str | None = None, seed: int = 0):
        self.dataset, self.machine = dataset, dataset.one_machine(machine)
        self.spaces = dataset.spaces(self.machine)
        self.seed = seed
        self._found: dict[tuple[str, str], list[Measurement]] = {}  # (task id, code): its measurements, once found
        self.calls: dict[str, int] = {}  # judgements so far of each (task, code, incumbent)
        signature = dataset.machines.get(self.machine)
        self.device_kind = f"{KIND}: {signature.cpu if signature else self.machine}"

    def space(self, task: Task) -> dict[str, list[Measurement]]:
        """The task's measured configurations; a one-line error when the dataset does not hold this task."""
        configs = self.spaces.get(task.id)
        if not configs:
            raise UserError(f"{self.dataset.path} holds no measured space of {task.id} (machine {self.machine})")
        if any(rows[0].task_sha != task_sha(task) for rows in configs.values()):
            raise UserError(f"{task.id} changed since {self.dataset.path} measured it: measure it again")
        return configs

    def _rows(self, task: Task, code: str) -> list[Measurement]:
        found = self._found.get((task.id, code))
        if found is None:
            found = self._found[(task.id, code)] = self._find(task, code)
        return found

    def _find(self, task: Task, code: str) -> list[Measurement]:
        try:
            key, settings = configuration(code)
        except KnobError as exc:
            raise UserError(f"a replay judges knob settings of a measured seed only: {exc}") from None
        rows = self.space(task).get(key)
        if rows is None:
            raise UserError(f"{self.dataset.path} has no measurement of {task.id} at {settings or 'the seed'}")
        space = self.dataset.space_records.get((self.machine, task.id))
        if space is not None and K.apply(space.seed, settings) != K.apply(code, settings):
            raise UserError(f"{task.id}: the candidate is not the measured seed at {K.describe(settings)}")
        return rows

    def judge(self, item: EvaluationInput) -> Verdict:
        """The verdict the guard would have given ``item``, drawn from the dataset."""
        rows = self._rows(item.task, item.code)
        # Seeded by what is judged and how often it was before: the same draws whatever order agents' turns end in.
        text = f"{self.seed}|{item.task.id}|{item.code}|{item.incumbent}"
        times = self.calls[text] = self.calls.get(text, 0) + 1
        rng = random.Random(hashlib.sha256(f"{text}|{times}".encode()).hexdigest())
        row = rng.choice(rows)
        seconds = rows[0].seconds
        if row.verdict == "REJECT":
            return Verdict.reject(row.stage, row.reason, seconds=seconds)  # type: ignore[arg-type]
        if not item.timed:
            return Verdict(
                verdict="ACCEPT",
                stage="check",
                reason="correct on every workload (not timed)",
                correct=True,
                seconds=seconds,
            )
        if not row.timed:
            return row_verdict(row, seconds)
        mine = draw(row, rng)
        theirs: dict[str, float] | None = None
        margin = row.margin or 0.0
        if item.incumbent is not None:
            timed = [r for r in self._rows(item.task, item.incumbent) if r.timed]
            if timed:
                other = rng.choice(timed)
                theirs, margin = draw(other, rng), max(margin, other.margin or 0.0)
        results = [
            WorkloadResult(
                name=w.name,
                sizes={},
                t_ref_s=w.t_ref_s,
                t_cand_s=w.t_ref_s / mine[w.name],
                speedup=mine[w.name],
                speedup_vs_incumbent=mine[w.name] / theirs[w.name] if theirs is not None else None,
                spread=0.0,
                rounds=len(w.log_ratios),
                reps=1,
            )
            for w in row.workloads
        ]
        return decide(results, margin, theirs is not None, 0.0, Peaks(source=KIND), seconds=seconds, device=KIND)

    def submit(self, inputs: Sequence[EvaluationInput]) -> list[Future[Verdict]]:
        futures = []
        for item in inputs:
            future: Future[Verdict] = Future()
            try:
                future.set_result(self.judge(item))
            except UserError as exc:
                future.set_exception(exc)
            futures.append(future)
        return futures

    def native_requests(self, task: Task, guard: GuardConfig, source: str) -> list[native.BuildRequest]:
        return []  # a replay builds nothing

    def build_as_sandbox(self, task: Task, guard: GuardConfig, request: native.BuildRequest) -> native.BuildResult:
        raise UserError("a replay builds nothing natively")

    def tasks_at_once(self, agents: int) -> int:
        return 1

    def judgeable(self, task: Task) -> frozenset[str] | None:
        """The configurations measured (TenSet's rule: a sampled space is searched over its sample only)."""
        return frozenset(self.space(task))

    def measured_start(self, task: Task) -> str | None:
        """The seed the dataset measured ``task``'s space of: a run replays from it, whatever the lowering
        generates today."""
        space = self.dataset.space_records.get((self.machine, task.id))
        return space.seed if space is not None else None

    def release(self, task: Task) -> None:
        pass  # nothing is kept per task

    def close(self) -> None:
        pass
