"""The kernel's accounting of a worker, read from outside it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kernelkiln.guard.measurement import accounting
from kernelkiln.guard.measurement.accounting import Usage

pytestmark = pytest.mark.skipif(not accounting.available(), reason="this kernel exposes no schedstat")


@pytest.fixture
def spinner():
    # Past its start-up, where reading its modules can put it to sleep on the disk for a moment.
    code = "import sys; print('spinning', flush=True)\nwhile True: pass"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"spinning\n"
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    time.sleep(0.3)  # past its start-up
    yield proc.pid
    proc.kill()
    proc.wait()


def test_a_sleeping_process_accrues_no_cpu_time_and_settles_at_once(sleeper):
    before = accounting.cpu_ns(sleeper)
    assert accounting.settle(sleeper, timeout_s=1.0)
    time.sleep(0.05)
    assert accounting.cpu_ns(sleeper) == before


def test_a_running_process_accrues_cpu_time_and_never_settles(spinner):
    start = accounting.cpu_ns(spinner)
    assert not accounting.settle(spinner, timeout_s=0.05)
    deadline = time.monotonic() + 5
    while accounting.cpu_ns(spinner) == start and time.monotonic() < deadline:
        time.sleep(0.01)
    assert accounting.cpu_ns(spinner) > start


def test_a_gone_process_reads_as_none_and_settled():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert accounting.cpu_ns(proc.pid) is None and accounting.thread_waits(proc.pid) == {}
    assert accounting.settle(proc.pid, timeout_s=0.01)


def test_every_thread_of_a_process_has_a_run_queue_wait():
    waits = accounting.thread_waits(os.getpid())
    assert os.getpid() in waits and all(ns >= 0 for ns in waits.values())


def test_the_longest_wait_of_any_thread_counts_and_new_threads_count_from_zero():
    before = Usage(cpu_ns=1_000, waits={1: 100, 2: 5_000})
    after = Usage(cpu_ns=3_001_000, waits={1: 2_000_100, 2: 5_500, 3: 700_000})
    cpu_s, waited_s = after.since(before)
    assert cpu_s == pytest.approx(3e-3) and waited_s == pytest.approx(2e-3)
    cpu_s, waited_s = Usage(cpu_ns=0, waits={9: 50}).since(Usage(cpu_ns=0, waits={}))
    assert waited_s == pytest.approx(50e-9)
