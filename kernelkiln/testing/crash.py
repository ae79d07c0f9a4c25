"""A run of the optimizer that SIGKILLs itself at one step boundary (for the crash tests).

``python -m kernelkiln.testing.crash STORE_URL OUT BOUNDARY N`` runs the tuner on the tiny
softmax task and kills its own process, as the kernel's OOM killer or a power cut would,
right after the N-th pass through ``BOUNDARY``. It prints the run id first, so the killed
run can be resumed.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from kernelkiln.evaluation.config import ClusterConfig
from kernelkiln.guard.session import GuardSession
from kernelkiln.memory import callbacks
from kernelkiln.memory.memory import Memory
from kernelkiln.memory.rules import Consolidator
from kernelkiln.orchestrator import search as search_module
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.observer import Observer
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.store import open_store
from kernelkiln.store.attempts import Attempts
from kernelkiln.store.store import Store
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.tasks import TASKS

BUDGET = 4

# Each boundary: (owner, attribute) whose call is followed by the kill.
BOUNDARIES = {
    "evaluated": (GuardSession, "evaluate"),  # judged, nothing stored yet (a local run's guard)
    "attempt-written": (Attempts, "add"),  # inside memory's transaction, before the board, stages and lesson
    "rules-rebuilt": (Consolidator, "rebuild"),  # stages closed and values applied, not committed
    "lesson-written": (callbacks, "add_lesson"),  # the last write of the transaction, not committed
    "memory-committed": (callbacks.MemoryCallbacks, "after_verdict"),  # before progress and the agent's state
    "task-ended": (callbacks.MemoryCallbacks, "on_task_end"),  # before the run records the task finished
    "confirmed": (search_module, "confirmation"),  # the best judged again, not recorded
}


def _kill_after(owner: object, name: str, nth: int) -> None:
    real = getattr(owner, name)
    calls = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        calls[0] += 1
        if calls[0] == nth:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, wrapped)


class _PrintRunId(Observer):
    def __init__(self, store: Store) -> None:
        self.store = store

    def task_started(self, task_id: str, budget: int, done: int, agents: list[str]) -> None:
        with self.store.read() as conn:
            runs = self.store.runs.all(conn)
        print(runs[-1].id, flush=True)


def main(argv: list[str]) -> None:
    """``STORE_URL OUT BOUNDARY N [CLUSTER]``: CLUSTER (``ray``) judges on the Ray cluster RAY_ADDRESS names."""
    url, out, boundary, nth = argv[0], Path(argv[1]), argv[2], int(argv[3])
    cluster = ClusterConfig(address=argv[4]) if len(argv) > 4 else ClusterConfig()
    _kill_after(*BOUNDARIES[boundary], nth)
    store = open_store(url)
    config = OptimizeConfig(
        budget=BUDGET, guard=fast_config(time_budget_s=0.3), confirm_time_budget_s=0.3, cluster=cluster
    )
    Optimizer(Memory(store), out, _PrintRunId(store)).start([TaskSpec(str(TASKS / "tiny_softmax.py"), {})], config, out)
    store.close()


if __name__ == "__main__":
    main(sys.argv[1:])
