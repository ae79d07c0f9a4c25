"""What the host offers the guard: usable cores (affinity and cgroup quota) and the threads a timed run may use."""

from __future__ import annotations

import os

from kernelkiln.platforms import host


def test_a_cgroup_quota_grants_whole_cores(tmp_path):
    quota = tmp_path / "cpu.max"
    quota.write_text("250000 100000\n")
    assert host._cgroup_cores(quota) == 2
    quota.write_text("50000 100000\n")
    assert host._cgroup_cores(quota) == 1
    quota.write_text("max 100000\n")
    assert host._cgroup_cores(quota) is None
    assert host._cgroup_cores(tmp_path / "absent") is None


def test_usable_cores_are_the_affinity_mask_capped_by_the_quota(monkeypatch):
    monkeypatch.setattr(host, "_cgroup_cores", lambda: None)
    assert host.usable_cores() == len(os.sched_getaffinity(0))
    monkeypatch.setattr(host, "_cgroup_cores", lambda: 1)
    assert host.usable_cores() == 1


def test_the_default_leaves_one_core_to_the_guard(monkeypatch):
    monkeypatch.setattr(host, "usable_cores", lambda: 8)
    assert host.fit_threads(None) == (7, "")
    assert host.fit_threads(3) == (3, "")


def test_asking_for_every_core_is_clamped_to_all_but_one_and_says_why(monkeypatch):
    monkeypatch.setattr(host, "usable_cores", lambda: 2)
    threads, why = host.fit_threads(2)
    assert threads == 1
    assert "asked for 2 threads, timed at 1" in why and "keeps one" in why and "collapses" in why


def test_a_single_core_machine_times_at_one_thread(monkeypatch):
    monkeypatch.setattr(host, "usable_cores", lambda: 1)
    assert host.fit_threads(None) == (1, "")
    threads, why = host.fit_threads(4)
    assert threads == 1 and "single core" in why
