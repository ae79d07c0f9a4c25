"""How one batch's time is derived from the wall clock and the kernel's accounting."""

from __future__ import annotations

import pytest

from kernelkiln.guard.measurement.accounting import Delta
from kernelkiln.guard.measurement.timing import RequestCost, batch_time, rse

COST = RequestCost(wall_s=1e-4, cpu_s=5e-5, jitter_s=1e-5)


def cpu(wall, usage, threads=1):
    return batch_time(wall, usage, COST, threads, cpu_accounting=True, accounted=True, reps=10)


def test_time_spent_waiting_for_a_core_is_taken_out():
    quiet = cpu(0.0051, Delta(cpu_s=0.00505, exact=True))
    busy = cpu(0.0091, Delta(cpu_s=0.00505, worker_wait_s=0.004, exact=True))
    assert busy.seconds == pytest.approx(quiet.seconds, rel=0.01)
    assert busy.correction == 0.0  # the single thread's CPU time agrees: nothing rests on an estimate


def test_forged_waits_cannot_make_a_batch_faster_than_its_cpu_time():
    # the main thread sat in the run queue while the worker's own threads did the work
    sample = cpu(0.01, Delta(cpu_s=0.01, worker_wait_s=0.009, exact=True))
    assert sample.seconds * 10 == pytest.approx(0.01 - COST.cpu_s)


def test_cpu_time_is_charged_against_the_cores_the_worker_was_given():
    # 4 threads' worth of CPU time in a 2-thread worker: at least twice the wall clock's share
    sample = cpu(0.01, Delta(cpu_s=0.04, worker_wait_s=0.009, exact=True), threads=2)
    assert sample.seconds * 10 == pytest.approx((0.04 - COST.cpu_s) / 2)


def test_blocked_time_counts_as_time():
    sample = cpu(0.01, Delta(cpu_s=0.002, exact=True))  # off the CPU, but not waiting for it
    assert sample.seconds * 10 == pytest.approx(0.01 - COST.wall_s)


def test_a_large_estimated_correction_is_flagged_for_a_rerun():
    # two threads: CPU time is only a bound, so 60% taken out on the waits' word is an estimate
    sample = cpu(0.01, Delta(cpu_s=0.006, worker_wait_s=0.006, exact=True), threads=2)
    assert sample.correction > 0.5


def test_inexact_readings_take_nothing_out_and_flag_the_round():
    sample = cpu(0.01, Delta(cpu_s=0.001, worker_wait_s=0.009, exact=False))
    assert sample.seconds * 10 == pytest.approx(0.01 - COST.wall_s) and sample.correction == 1.0


def test_a_device_is_timed_by_the_wall_clock_and_disturbed_rounds_are_flagged():
    sample = batch_time(
        0.01,
        Delta(cpu_s=0.0001, worker_wait_s=0.004, exact=True),
        COST,
        1,
        cpu_accounting=False,
        accounted=True,
        reps=1,
    )
    assert sample.seconds == pytest.approx(0.01 - COST.wall_s) and sample.correction == pytest.approx(0.4)


def test_without_accounting_the_wall_clock_stands_and_nothing_is_flagged():
    sample = batch_time(0.01, Delta(), COST, 1, cpu_accounting=False, accounted=False, reps=1)
    assert sample.seconds == pytest.approx(0.01 - COST.wall_s) and sample.correction == 0.0


def test_the_standard_error_grows_with_the_spread_of_rounds():
    assert rse([0.0]) == float("inf")
    assert rse([0.01, -0.01] * 6) < rse([0.1, -0.1] * 6)
