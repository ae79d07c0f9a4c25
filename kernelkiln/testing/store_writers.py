"""Writer processes that hammer one store at once (for concurrency tests and benchmarks).

Each function runs in a child process (``multiprocessing`` with the spawn method) and
opens its own store connection.
"""

from __future__ import annotations

import os
import signal

from kernelkiln.store.records import Adoption, Attempt, Experience
from kernelkiln.store.store import open_store

SHARED_EXPERIENCE = "e-shared-counter"


def write_attempts(url: str, worker: int, count: int) -> int:
    """Insert ``count`` attempts (one transaction each) and bump a shared counter each time.

    The counter bump is a read-modify-write of one experience's ``retrievals``: with a
    lost update the final count falls short of the number of writes.
    """
    store = open_store(url)
    done = 0
    for i in range(count):
        with store.write() as conn:
            store.attempts.add(conn, Attempt(id=f"a-w{worker}-{i}", task_id=f"t{worker}", verdict="KEEP", speedup=1.0))
            exp = store.experiences.get_many(conn, [SHARED_EXPERIENCE], for_update=True)[SHARED_EXPERIENCE]
            store.experiences.update(conn, SHARED_EXPERIENCE, retrievals=exp.retrievals + 1)
        done += 1
    store.close()
    return done


def write_batches_forever(url: str, batch: int, ready_path: str) -> None:
    """Write transactions of ``batch`` experiences plus their adoption records until killed.

    Every transaction tags its rows with one batch number, so a torn write shows as a
    batch with fewer than ``batch`` rows. Touches ``ready_path`` after the first commit.
    """
    store = open_store(url)
    number = 0
    while True:
        with store.write() as conn:
            exps = [
                Experience(
                    id=f"e-b{number}-{k}", text=f"batch {number} lesson {k} vectorize tile", summary=f"b{number}"
                )
                for k in range(batch)
            ]
            store.experiences.add_many(conn, exps)
            store.adoptions.add_many(
                conn,
                [Adoption(attempt_id=f"a-b{number}", experience_id=e.id, task_id="t", adopted=True) for e in exps],
            )
        if number == 0:
            with open(ready_path, "w") as f:
                f.write(str(os.getpid()))
        number += 1


def kill(pid: int) -> None:
    """SIGKILL ``pid`` (no cleanup, no atexit, no rollback by the process itself)."""
    os.kill(pid, signal.SIGKILL)


def close_stages(url: str, worker: int, count: int, experience_id: str) -> int:
    """Close ``count`` correctness stages through MemoryCallbacks, each adopting ``experience_id``.

    With a lost update the experience's retrieval or adoption count falls short.
    """
    from kernelkiln.memory import Memory
    from kernelkiln.testing.memory_fakes import attempt, result

    memory = Memory(open_store(url))
    for i in range(count):
        att = attempt(f"w{worker}-t{i}", verdict="KEEP", time_ms=1.0)
        memory.callbacks.after_verdict(result(att, adopted=[experience_id]))
    memory.store.close()
    return count
