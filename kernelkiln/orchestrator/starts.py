"""The code a task's agents start from: the user's file, the task's own starting candidate, or one generated from
its reference."""

from __future__ import annotations

import json
from pathlib import Path

from kernelkiln.errors import UserError
from kernelkiln.evaluation.pool import EvaluationPool
from kernelkiln.lowering import Unsupported, generate
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.platforms.host import fit_threads
from kernelkiln.task.model import Task

_GENERATED: dict[tuple, str | Unsupported] = {}
GENERATED = "generated from the reference"  # the origin of a starting candidate ``kiln lower`` made


class NoStart(UserError):
    """The tuner has nothing to start a task from (a bench skips such a task and says so)."""


def measured_starts(
    pool: EvaluationPool, tasks: list[Task], starts: dict[str, tuple[str, str]]
) -> dict[str, tuple[str, str]]:
    """``starts`` (task id -> (code, origin)) with each task a replay measured starting from the code it measured,
    whatever the lowering generates today; the origin stays the run's, so memory's signatures do not move."""
    replayed = dict(starts)
    for task in tasks:
        code, origin = starts[task.id]
        start = pool.measured_start(task)
        if code and start is not None:
            replayed[task.id] = (start, origin)
    return replayed


def starting_code(task: Task, config: OptimizeConfig) -> tuple[str, str]:
    """(code, where it came from) for ``task``; "" when llm agents write from scratch.

    Order: ``--start FILE``, the task's KILN start for the platform, then (cpu) the candidate
    generated from the reference's operations. The tuner needs one and says why there is none.
    """
    if config.policy.from_scratch():
        return "", "none (--from-scratch)"
    if config.start_file:
        path = Path(config.start_file)
        try:
            return path.read_text(), str(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"cannot read --start {path}: {exc}") from None
    start = task.start_for(config.platform)
    if start is not None:
        return start.read_text(), str(start)
    why = f"kernelkiln generates starting candidates for the cpu platform only, not {config.platform}"
    if config.platform == "cpu":
        threads = config.guard.threads  # a cluster's devices fit them to their own cores; here, the guard's rule
        threads = fit_threads(threads)[0] if threads is not None and config.cluster.address == "local" else threads
        key = (str(task.path), json.dumps(task.overrides, sort_keys=True, default=repr), threads)
        if key not in _GENERATED:  # a bench or a resume asks again: trace and lower once per process
            try:
                _GENERATED[key] = generate(task, threads=threads).source
            except Unsupported as exc:
                _GENERATED[key] = exc
        generated = _GENERATED[key]
        if isinstance(generated, str):
            return generated, GENERATED
        why = f"kernelkiln cannot generate one: {generated}"
    if config.policy.needs_start:
        raise NoStart(
            f"{task.path}: the tuner needs a starting candidate that declares KNOBS, and {why}; "
            "give one with --start FILE, or use --policy llm"
        )
    return "", f"none ({why})"
