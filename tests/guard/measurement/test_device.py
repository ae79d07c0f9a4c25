"""DeviceLock: builds and checks hold it shared and overlap; timing holds it alone and is never starved."""

from __future__ import annotations

import threading

from kernelkiln.guard.measurement.device import DeviceLock

JOIN_S = 5.0  # generous: a join only times out when the lock is broken


class Holder:
    """A thread that takes the lock in ``mode``, reports it holds it, and releases on ``release``."""

    def __init__(self, lock: DeviceLock, mode: str, log: list[str] | None = None, name: str = "") -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.log = log
        self.name = name or mode
        self.thread = threading.Thread(target=self._run, args=(lock, mode), daemon=True)

    def _run(self, lock: DeviceLock, mode: str) -> None:
        with getattr(lock, mode)():
            if self.log is not None:
                self.log.append(self.name)
            self.entered.set()
            self.release.wait(JOIN_S)

    def start(self) -> Holder:
        self.thread.start()
        return self

    def finish(self) -> None:
        self.release.set()
        self.thread.join(JOIN_S)
        assert not self.thread.is_alive()


def wait_until(predicate, timeout: float = JOIN_S) -> bool:
    """Poll ``predicate`` (state changes under the lock's condition) until it holds or ``timeout`` passes."""
    done = threading.Event()
    for _ in range(int(timeout / 0.005)):
        if predicate():
            return True
        done.wait(0.005)
    return predicate()


def waiting_exclusives(lock: DeviceLock) -> int:
    """Exclusives queued on the lock (read under its condition): lets a test know a thread is waiting, not racing."""
    with lock._cond:
        return lock._waiting


def test_shared_holders_overlap_each_other():
    lock = DeviceLock()
    first = Holder(lock, "shared").start()
    assert first.entered.wait(JOIN_S)
    second = Holder(lock, "shared").start()
    assert second.entered.wait(JOIN_S), "a second shared holder waited for the first"
    first.finish()
    second.finish()


def test_many_shared_holders_hold_at_once():
    lock = DeviceLock()
    holders = [Holder(lock, "shared").start() for _ in range(6)]
    assert all(h.entered.wait(JOIN_S) for h in holders)
    for holder in holders:
        holder.finish()


def test_exclusive_waits_for_shared_holders_to_leave():
    lock = DeviceLock()
    shared = Holder(lock, "shared").start()
    assert shared.entered.wait(JOIN_S)
    exclusive = Holder(lock, "exclusive").start()
    assert wait_until(lambda: waiting_exclusives(lock) == 1)
    assert not exclusive.entered.is_set()
    shared.finish()
    assert exclusive.entered.wait(JOIN_S)
    exclusive.finish()


def test_shared_waits_while_exclusive_holds():
    lock = DeviceLock()
    exclusive = Holder(lock, "exclusive").start()
    assert exclusive.entered.wait(JOIN_S)
    shared = Holder(lock, "shared").start()
    shared.thread.join(0.05)
    assert not shared.entered.is_set()
    exclusive.finish()
    assert shared.entered.wait(JOIN_S)
    shared.finish()


def test_exclusive_excludes_another_exclusive():
    lock = DeviceLock()
    first = Holder(lock, "exclusive").start()
    assert first.entered.wait(JOIN_S)
    second = Holder(lock, "exclusive").start()
    assert wait_until(lambda: waiting_exclusives(lock) == 1)
    assert not second.entered.is_set()
    first.finish()
    assert second.entered.wait(JOIN_S)
    second.finish()


def test_a_waiting_exclusive_is_not_starved_by_new_shared_holders():
    lock = DeviceLock()
    log: list[str] = []
    shared = [Holder(lock, "shared", log, "s0").start()]
    assert shared[0].entered.wait(JOIN_S)
    exclusive = Holder(lock, "exclusive", log, "x").start()
    assert wait_until(lambda: waiting_exclusives(lock) == 1)
    # A stream of new shared holders arrives while the exclusive waits: none may jump ahead of it.
    late = [Holder(lock, "shared", log, f"s{i}").start() for i in range(1, 5)]
    for holder in late:
        holder.thread.join(0.02)
        assert not holder.entered.is_set(), "a new shared holder overtook the waiting exclusive"
    shared[0].finish()
    assert exclusive.entered.wait(JOIN_S)
    assert not any(h.entered.is_set() for h in late)
    exclusive.finish()
    assert all(h.entered.wait(JOIN_S) for h in late)
    for holder in late:
        holder.finish()
    assert log[:2] == ["s0", "x"]


def test_the_lock_is_released_when_the_holder_raises():
    lock = DeviceLock()
    for mode in ("shared", "exclusive"):
        try:
            with getattr(lock, mode)():
                raise RuntimeError("boom")
        except RuntimeError:
            pass
    done = threading.Event()

    def take_exclusive():
        with lock.exclusive():
            done.set()

    thread = threading.Thread(target=take_exclusive, daemon=True)
    thread.start()
    thread.join(JOIN_S)
    assert done.is_set()


def test_shared_and_exclusive_never_hold_together_under_contention():
    lock = DeviceLock()
    state = {"shared": 0, "exclusive": 0}
    guard = threading.Lock()
    violations: list[str] = []

    def worker(mode: str) -> None:
        for _ in range(200):
            with getattr(lock, mode)():
                with guard:
                    state[mode] += 1
                    if state["exclusive"] > 1 or (state["exclusive"] and state["shared"]):
                        violations.append(str(state))
                with guard:
                    state[mode] -= 1

    threads = [
        threading.Thread(target=worker, args=(m,), daemon=True)
        for m in ("shared", "shared", "shared", "exclusive", "exclusive")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_S * 4)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert violations == []
