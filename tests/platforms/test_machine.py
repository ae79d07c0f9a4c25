"""`kiln machine` measurements: positive figures per core count, a cache that round-trips, CPU peaks from it."""

from __future__ import annotations

import json
import math
import os

import pytest

from kernelkiln.platforms import machine
from kernelkiln.platforms.cpu import CpuPlatform
from kernelkiln.platforms.host import default_threads

TINY = {"array_bytes": 1 << 20, "fma_target_s": 0.002, "triad_reps": 2, "fma_reps": 2}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        path = tmp_path_factory.mktemp("kiln_cache")
        patch.setenv("KILN_CACHE_DIR", str(path))
        yield path


@pytest.fixture(scope="module")
def measured(cache_dir):
    lines: list[str] = []
    record = machine.measure(refresh=True, progress=lines.append, **TINY)
    return record, lines


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_measure_reports_positive_finite_figures_for_every_core_count(measured):
    record, _ = measured
    cpus = os.cpu_count() or 1
    assert list(record.per_cores) == [str(n) for n in machine.core_counts(cpus, default_threads())]
    for figures in record.per_cores.values():
        assert set(figures) == {"bandwidth_gbs", "bandwidth_write_allocate_gbs", "peak_gflops"}
        assert all(math.isfinite(v) and v > 0 for v in figures.values())
        # write-allocate counts 4 arrays where STREAM counts 3
        assert figures["bandwidth_write_allocate_gbs"] == pytest.approx(figures["bandwidth_gbs"] * 4 / 3, rel=0.01)


def test_the_top_level_figures_are_those_at_the_guards_default_core_count(measured):
    record, _ = measured
    assert record.cores == min(default_threads(), os.cpu_count() or 1)
    top = record.per_cores[str(record.cores)]
    assert (record.bandwidth_gbs, record.peak_gflops) == (top["bandwidth_gbs"], top["peak_gflops"])
    assert record.cpu and record.cpu_key == machine.cpu_key() and record.measured_at
    assert record.kernel.endswith("FMA accumulators")


def test_measure_reports_progress_line_by_line(measured):
    _, lines = measured
    assert lines[0].startswith("compiling")
    assert any(line.startswith("triad on 1 core") for line in lines)
    assert any(line.startswith("FMA loop on 1 core") for line in lines)


def test_the_measured_record_round_trips_through_the_cache(measured, cache_dir):
    record, _ = measured
    assert machine.cache_path().parent == cache_dir / "machine"
    assert machine.load_peaks() == record


def test_measure_returns_the_cached_record_without_measuring_unless_refreshed(measured, monkeypatch):
    record, _ = measured

    def boom(*args, **kwargs):
        raise AssertionError("measured although cached")

    monkeypatch.setattr(machine, "_measure", boom)
    assert machine.measure() == record
    with pytest.raises(AssertionError, match="measured although cached"):
        machine.measure(refresh=True)


def test_nothing_is_cached_on_a_fresh_machine(empty_cache):
    assert machine.load_peaks() is None


def test_an_unreadable_or_foreign_cache_file_counts_as_not_measured(empty_cache, measured):
    record, _ = measured
    path = machine.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert machine.load_peaks() is None
    path.write_text(json.dumps({**record.to_dict(), "cpu_key": "some-other-cpu"}))
    assert machine.load_peaks() is None
    path.write_text(json.dumps(["a", "list"]))
    assert machine.load_peaks() is None


def test_a_record_tolerates_unknown_fields(measured):
    record, _ = measured
    assert machine.MachineRecord.from_dict({**record.to_dict(), "from_the_future": 1}) == record


def test_core_counts_are_one_the_powers_of_two_all_cores_and_the_default():
    assert machine.core_counts(1, 1) == [1]
    assert machine.core_counts(2, 1) == [1, 2]
    assert machine.core_counts(8, 7) == [1, 2, 4, 7, 8]
    assert machine.core_counts(12, 11) == [1, 2, 4, 8, 11, 12]


def test_triad_arrays_are_at_least_64_mib_unless_memory_is_short():
    size = machine.default_array_bytes()
    assert size > 0
    assert size >= machine.MIN_ARRAY_BYTES or size == machine._available_memory() // 8


def test_cpu_peaks_come_from_the_cached_record(measured):
    record, _ = measured
    peaks = CpuPlatform().peaks()
    assert (peaks.bandwidth_gbs, peaks.gflops_fp32) == (record.bandwidth_gbs, record.peak_gflops)
    assert peaks.source == f"kiln machine, {record.measured_at[:10]}, {machine.cores_text(record.cores)}"


def test_cpu_peaks_are_measured_on_first_use_and_cached(empty_cache, monkeypatch, measured):
    record, _ = measured
    calls = []

    def once(*args, **kwargs):
        calls.append(1)
        return record

    monkeypatch.setattr(machine, "_measure", once)
    monkeypatch.setattr(machine, "_failed", [])
    monkeypatch.setattr(machine, "cpu_key", lambda: record.cpu_key)
    first, second = CpuPlatform().peaks(), CpuPlatform().peaks()
    assert calls == [1]
    assert first == second and first.gflops_fp32 == record.peak_gflops
    assert machine.load_peaks() == record


def test_a_failed_first_measurement_leaves_the_peaks_unknown_says_why_and_is_not_retried(empty_cache, monkeypatch):
    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("no C compiler found")

    monkeypatch.setattr(machine, "_measure", broken)
    monkeypatch.setattr(machine, "_failed", [])
    first, second = CpuPlatform().peaks(), CpuPlatform().peaks()
    assert calls == [1]
    assert (first.bandwidth_gbs, first.gflops_fp32) == (None, None)
    assert "no C compiler found" in first.source and second == first


def test_cpu_peaks_follow_the_asked_core_count_and_bound_an_unmeasured_one_from_above(monkeypatch, tmp_path):
    from kernelkiln.platforms import cpu as cpu_module
    from kernelkiln.platforms.machine import MachineRecord

    record = MachineRecord.from_dict(
        {
            "cpu": "x",
            "cpu_key": "k",
            "cpu_count": 4,
            "cores": 3,
            "bandwidth_gbs": 30.0,
            "peak_gflops": 300.0,
            "per_cores": {
                "1": {"bandwidth_gbs": 10.0, "peak_gflops": 100.0},
                "3": {"bandwidth_gbs": 30.0, "peak_gflops": 300.0},
            },
            "measured_at": "2026-11-30T00:00:00+00:00",
            "kernelkiln_version": "0",
        }
    )
    monkeypatch.setattr(cpu_module, "first_use", lambda: (record, ""))
    platform = cpu_module.CpuPlatform()
    assert platform.peaks().bandwidth_gbs == 30.0 and platform.peaks(3).gflops_fp32 == 300.0
    assert platform.peaks(1).bandwidth_gbs == 10.0
    assert platform.peaks(2).bandwidth_gbs == 30.0 and "nearest above 2" in platform.peaks(2).source
    assert platform.peaks(4).bandwidth_gbs is None and "no figures" in platform.peaks(4).source
