"""Cores for the timed workers and for the guard."""

from __future__ import annotations

import os
import threading

from kernelkiln.guard.measurement import placement


def test_workers_get_the_last_cores_and_the_guard_the_rest(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert placement.plan(1) == placement.Placement(worker_cores=[3], guard_cores=[0, 1, 2])
    assert placement.plan(3) == placement.Placement(worker_cores=[1, 2, 3], guard_cores=[0])


def test_without_a_core_to_spare_nothing_is_pinned(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert placement.plan(2) == placement.Placement() and placement.plan(5) == placement.Placement()


def test_pinning_moves_only_the_calling_thread_and_is_undone():
    saved = os.sched_getaffinity(0)
    one = [min(saved)]
    asked, seen = threading.Event(), {}

    def other() -> None:
        asked.wait(10)
        seen["other"] = os.sched_getaffinity(0)

    thread = threading.Thread(target=other)
    thread.start()  # before the pinning: a thread that exists keeps its own mask
    with placement.pinned(one):
        seen["inside"] = os.sched_getaffinity(0)
        asked.set()
        thread.join()
    assert seen["inside"] == set(one) and seen["other"] == saved
    assert os.sched_getaffinity(0) == saved
    with placement.pinned(None):
        assert os.sched_getaffinity(0) == saved
