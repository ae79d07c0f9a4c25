"""A run killed with SIGKILL at any step boundary: no KEEP without its lesson, and resume repeats nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter

import pytest

from kernelkiln.memory import distill
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.run import Optimizer
from kernelkiln.store import open_store
from kernelkiln.testing.crash import BOUNDARIES, BUDGET

# The first pass through a boundary is the seed's (no lesson in it); the second is a move's.
NTH = {"lesson-written": 1, "task-ended": 1, "confirmed": 1}


def _crash_run(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KILN_STORE"}
    return subprocess.run(
        [sys.executable, "-m", "kernelkiln.testing.crash", *args], capture_output=True, text=True, timeout=240, env=env
    )


def _lessons_missing(store, run_id: str) -> list[str]:
    """Ids of the run's KEEPs derived from a parent whose lesson is not stored."""
    with store.read() as conn:
        attempts = {a.id: a for a in store.attempts.for_run(conn, run_id)}
        stored = {e.id for e in store.experiences.list(conn, kind="experience")}
        task = store.tasks.get(conn, "tiny_softmax")
    missing = []
    for attempt in attempts.values():
        if attempt.verdict == "KEEP" and attempt.parent_id is not None:
            lesson = distill.win(attempt, attempts.get(attempt.parent_id), task.op_family, task.platform)
            if lesson is not None and lesson.id not in stored:
                missing.append(attempt.id)
    return missing


@pytest.mark.slow
@pytest.mark.parametrize("boundary", sorted(BOUNDARIES))
def test_a_run_killed_at_a_step_boundary_resumes_to_the_same_record(boundary, tmp_path):
    url = f"sqlite:///{tmp_path / 'kiln.db'}"
    killed = _crash_run(url, str(tmp_path / "out"), boundary, str(NTH.get(boundary, 2)))
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr[-2000:])
    run_id = killed.stdout.split()[0]
    store = open_store(url)
    try:
        assert _lessons_missing(store, run_id) == []

        Optimizer(Memory(store), tmp_path / "out").resume(run_id)
        with store.read() as conn:
            run = store.runs.get(conn, run_id)
            attempts = store.attempts.for_run(conn, run_id)
            stages = Counter((s.agent, s.stage) for s in store.stages.for_run(conn, run_id, "tiny_softmax"))
            lessons = [e for e in store.experiences.list(conn, kind="experience")]
        assert run.state.status == "done" and run.state.finished == ["tiny_softmax"]
        assert len(attempts) == BUDGET and len({a.case.code_hash for a in attempts}) == BUDGET  # none repeated
        assert _lessons_missing(store, run_id) == []
        assert stages and max(stages.values()) == 1, stages  # no stage scored twice
        assert len({e.id for e in lessons}) == len(lessons)
        assert run.state.confirmed["tiny_softmax"] is not None
    finally:
        store.close()
