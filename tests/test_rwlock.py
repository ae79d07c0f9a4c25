"""The readers-writer lock: readers share it, a writer holds it alone, a waiting writer goes before new readers.

No test sleeps or times anything: a thread's progress is seen through events and barriers,
and a thread blocked in the lock through a condition that says when a thread waits on it.
Every wait has a generous timeout, so a broken lock fails a test instead of hanging it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from kernelkiln.rwlock import ReadWriteLock

TIMEOUT = 30.0


class _Watched(threading.Condition):
    """A condition that counts the times a thread starts to wait on it: a test knows a thread is blocked."""

    def __init__(self) -> None:
        super().__init__()
        self.waits = threading.Semaphore(0)

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.release()
        return super().wait(timeout)

    def blocked(self, threads: int = 1) -> None:
        """Return once ``threads`` more waits have begun."""
        for _ in range(threads):
            assert self.waits.acquire(timeout=TIMEOUT), "no thread blocked in the lock"


def _watched_lock() -> tuple[ReadWriteLock, _Watched]:
    lock = ReadWriteLock()
    lock._cond = watched = _Watched()  # the lock's one condition, watched
    return lock, watched


class _Holder:
    """A thread that takes the lock (``shared`` or ``exclusive``), says so, and holds it until told to leave."""

    def __init__(self, section: Callable, name: str, log: list[str], hold: bool = True) -> None:
        self.inside = threading.Event()
        self.leave = threading.Event()
        if not hold:
            self.leave.set()
        self.errors: list[BaseException] = []
        self._section, self._name, self._log = section, name, log
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with self._section():
                self._log.append(f"{self._name} in")
                self.inside.set()
                assert self.leave.wait(TIMEOUT), f"{self._name} was never told to leave"
                self._log.append(f"{self._name} out")
        except BaseException as exc:
            self.errors.append(exc)

    def entered(self) -> None:
        assert self.inside.wait(TIMEOUT), f"{self._name} never got the lock"

    def release(self) -> None:
        self.leave.set()
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive(), f"{self._name} never left"
        assert self.errors == []


def test_readers_hold_the_lock_at_once():
    lock = ReadWriteLock()
    together = threading.Barrier(3, timeout=TIMEOUT)  # passed only when all three hold the lock at once
    passed = []

    def read() -> None:
        with lock.shared():
            together.wait()
            passed.append(True)

    threads = [threading.Thread(target=read, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert passed == [True, True, True]


def test_a_writer_waits_until_the_last_reader_leaves():
    lock, watched = _watched_lock()
    log: list[str] = []
    first, second = _Holder(lock.shared, "reader 1", log), _Holder(lock.shared, "reader 2", log)
    first.entered()
    second.entered()
    writer = _Holder(lock.exclusive, "writer", log, hold=False)
    watched.blocked()
    first.release()
    assert not writer.inside.is_set()  # one reader still holds it
    second.release()
    writer.entered()
    writer.release()
    assert log[-2:] == ["writer in", "writer out"] and log.index("writer in") > log.index("reader 2 out")


def test_a_writer_holds_the_lock_alone_and_the_waiting_writer_goes_before_the_waiting_reader():
    lock, watched = _watched_lock()
    log: list[str] = []
    writer = _Holder(lock.exclusive, "writer 1", log)
    writer.entered()
    reader = _Holder(lock.shared, "reader", log, hold=False)
    watched.blocked()
    second = _Holder(lock.exclusive, "writer 2", log, hold=False)
    watched.blocked()
    assert not reader.inside.is_set() and not second.inside.is_set()
    writer.release()
    second.entered()
    second.release()
    reader.entered()
    reader.release()
    assert log == ["writer 1 in", "writer 1 out", "writer 2 in", "writer 2 out", "reader in", "reader out"]


def test_a_waiting_writer_goes_before_readers_that_come_after_it():
    lock, watched = _watched_lock()
    log: list[str] = []
    reader = _Holder(lock.shared, "reader 1", log)
    reader.entered()
    writer = _Holder(lock.exclusive, "writer", log, hold=False)
    watched.blocked()
    late = _Holder(lock.shared, "reader 2", log, hold=False)
    watched.blocked()  # it blocks although only a reader holds the lock: the writer waits
    assert not late.inside.is_set()
    reader.release()
    writer.entered()
    writer.release()
    late.entered()
    late.release()
    assert log == ["reader 1 in", "reader 1 out", "writer in", "writer out", "reader 2 in", "reader 2 out"]


def test_a_writer_leaving_wakes_every_reader_waiting_behind_it():
    lock, watched = _watched_lock()
    log: list[str] = []
    writer = _Holder(lock.exclusive, "writer", log)
    writer.entered()
    together = threading.Barrier(3, timeout=TIMEOUT)
    passed = []

    def read() -> None:
        with lock.shared():
            together.wait()  # every waiting reader woke, and they share the lock
            passed.append(True)

    readers = [threading.Thread(target=read, daemon=True) for _ in range(3)]
    for t in readers:
        t.start()
    watched.blocked(3)
    writer.release()
    for t in readers:
        t.join(TIMEOUT)
    assert passed == [True, True, True]


@pytest.mark.parametrize("section", ["shared", "exclusive"])
def test_a_section_that_raises_releases_the_lock(section):
    lock = ReadWriteLock()
    with pytest.raises(RuntimeError), getattr(lock, section)():
        raise RuntimeError("inside")
    log: list[str] = []
    writer = _Holder(lock.exclusive, "writer", log, hold=False)
    writer.entered()
    writer.release()
    reader = _Holder(lock.shared, "reader", log, hold=False)
    reader.entered()
    reader.release()


def test_readers_and_writers_in_turn_never_overlap_a_writer_and_all_finish():
    lock = ReadWriteLock()
    state = {"readers": 0, "writers": 0}
    count = threading.Lock()
    overlaps: list[dict] = []
    start = threading.Barrier(8, timeout=TIMEOUT)

    def enter(kind: str) -> None:
        with count:
            state[kind] += 1
            if state["writers"] > 1 or (state["writers"] and state["readers"]):
                overlaps.append(dict(state))

    def leave(kind: str) -> None:
        with count:
            state[kind] -= 1

    def work(index: int) -> None:
        start.wait()
        for turn in range(200):
            kind, section = ("writers", lock.exclusive) if (index + turn) % 4 == 0 else ("readers", lock.shared)
            with section():
                enter(kind)
                leave(kind)

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads)  # no thread left waiting for a wakeup that never came
    assert overlaps == []
