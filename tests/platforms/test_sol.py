"""Speed-of-light bounds and fractions, worked by hand."""

from __future__ import annotations

import pytest

from kernelkiln.platforms.base import Peaks
from kernelkiln.platforms.sol import achieved, sol_bound_s, sol_fraction

PEAKS = Peaks(bandwidth_gbs=100.0, gflops_fp32=1000.0, source="test")


def test_a_compute_bound_workload_is_bounded_by_its_flops_over_peak():
    # 2e12 FLOPs / 1e12 FLOP/s = 2 s; 1e9 B / 1e11 B/s = 0.01 s
    assert sol_bound_s(2e12, 1e9, PEAKS) == pytest.approx(2.0)


def test_a_memory_bound_workload_is_bounded_by_its_bytes_over_bandwidth():
    # 1e9 FLOPs -> 1 ms; 4e9 B / 1e11 B/s = 40 ms
    assert sol_bound_s(1e9, 4e9, PEAKS) == pytest.approx(0.04)


def test_only_the_known_term_counts_when_flops_or_bytes_are_missing():
    assert sol_bound_s(None, 4e9, PEAKS) == pytest.approx(0.04)
    assert sol_bound_s(2e12, None, PEAKS) == pytest.approx(2.0)


def test_only_the_known_peak_counts_when_the_platform_lacks_one():
    no_flops = Peaks(bandwidth_gbs=100.0)
    assert sol_bound_s(2e12, 4e9, no_flops) == pytest.approx(0.04)
    no_bandwidth = Peaks(gflops_fp32=1000.0)
    assert sol_bound_s(2e12, 4e9, no_bandwidth) == pytest.approx(2.0)


def test_the_bound_is_none_when_nothing_is_known():
    assert sol_bound_s(None, None, PEAKS) is None
    assert sol_bound_s(2e12, 4e9, Peaks(source="not measured")) is None
    assert sol_bound_s(0, 0, PEAKS) is None


def test_the_fraction_is_the_bound_over_the_measured_time():
    assert sol_fraction(0.04, 0.16) == pytest.approx(0.25)
    assert sol_fraction(0.04, 0.02) == pytest.approx(2.0)  # faster than light: the caller flags it


def test_the_fraction_is_none_without_a_bound_or_a_usable_time():
    assert sol_fraction(None, 0.1) is None
    assert sol_fraction(0.04, None) is None
    assert sol_fraction(0.04, 0.0) is None
    assert sol_fraction(0.04, float("nan")) is None


def test_the_reached_rate_is_on_the_term_that_bounds_the_workload():
    peaks = Peaks(bandwidth_gbs=20.0, gflops_fp32=100.0)
    # 1 GB moved and 1 GFLOP: memory takes 50 ms, compute 10 ms, so memory bounds it
    memory = achieved(1e9, 1e9, 0.1, peaks)
    assert memory is not None and (memory.bound, memory.unit) == ("memory", "GB/s")
    assert memory.rate == pytest.approx(10.0) and memory.fraction == pytest.approx(0.5)
    assert memory.fraction == pytest.approx(sol_fraction(sol_bound_s(1e9, 1e9, peaks), 0.1))
    compute = achieved(1e10, 1e8, 0.2, peaks)  # compute 100 ms, memory 5 ms
    assert compute is not None and (compute.bound, compute.unit) == ("compute", "GFLOP/s")
    assert compute.rate == pytest.approx(50.0) and compute.fraction == pytest.approx(0.5)


def test_no_rate_without_a_time_or_any_known_term():
    peaks = Peaks(bandwidth_gbs=20.0, gflops_fp32=100.0)
    assert achieved(1e9, 1e9, None, peaks) is None
    assert achieved(None, None, 0.1, peaks) is None
    assert achieved(1e9, 1e9, 0.1, Peaks()) is None
