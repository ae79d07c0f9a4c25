"""`kiln machine` as a user runs it: cached records print at once; --refresh measures."""

from __future__ import annotations

import functools
import json

import pytest
from typer.testing import CliRunner

from kernelkiln.cli import machine as machine_cli
from kernelkiln.platforms import machine
from kernelkiln.testing.cli import command_app, kiln

KEYS = {"bandwidth_gbs", "peak_gflops", "cores", "per_cores", "measured_at", "cpu"}


@pytest.fixture
def cached(tmp_path, monkeypatch):
    """A pre-written cache record, so no test waits for a real measurement."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    record = machine.MachineRecord(
        cpu="Test CPU",
        cpu_key=machine.cpu_key(),
        cpu_count=2,
        cores=1,
        bandwidth_gbs=20.0,
        peak_gflops=100.0,
        per_cores={
            "1": {"bandwidth_gbs": 20.0, "bandwidth_write_allocate_gbs": 26.67, "peak_gflops": 100.0},
            "2": {"bandwidth_gbs": 30.0, "bandwidth_write_allocate_gbs": 40.0, "peak_gflops": 200.0},
        },
        measured_at="2026-01-02T03:04:05+00:00",
        kernelkiln_version="0.1.0",
        kernel="256-bit vectors, 12 FMA accumulators",
    )
    path = machine.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record.to_dict()))
    return record


@pytest.fixture
def app():
    return command_app(machine_cli.register)


def test_json_prints_the_cached_record_with_the_peaks_and_per_core_figures(cached):
    done = kiln("machine", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert KEYS <= set(out) and out["cached"] is True
    assert (out["bandwidth_gbs"], out["peak_gflops"], out["cores"], out["cpu"]) == (20.0, 100.0, 1, "Test CPU")
    assert out["per_cores"]["2"]["peak_gflops"] == 200.0


def test_the_table_says_the_figures_are_cached_and_how_to_refresh(cached):
    done = kiln("machine")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "Test CPU" in text and "100.0" in text and "200.0" in text
    assert "cached" in text and "--refresh" in text


def test_refresh_measures_again_and_replaces_the_cache(cached, app, monkeypatch):
    tiny = functools.partial(machine.measure, array_bytes=1 << 20, fma_target_s=0.002, triad_reps=2, fma_reps=2)
    monkeypatch.setattr(machine, "measure", tiny)
    outcome = CliRunner().invoke(app, ["machine", "--json", "--refresh"], catch_exceptions=False)
    assert outcome.exit_code == 0, outcome.output
    out = json.loads(outcome.stdout)
    assert out["cached"] is False and out["cpu"] != "Test CPU" and out["peak_gflops"] > 0
    assert machine.load_peaks().measured_at == out["measured_at"]
