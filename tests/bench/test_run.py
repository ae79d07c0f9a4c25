"""A benchmark over a one-task suite, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelkiln.bench.baseline import compile_ratio
from kernelkiln.bench.run import Bench
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.task import load_task
from kernelkiln.testing.cli import kiln
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.tasks import tiny_suite


@pytest.fixture
def suite():
    with tiny_suite() as folder:
        yield folder


def test_a_bench_writes_bench_json_with_every_repeat_and_their_means(suite, tmp_path):
    out = Bench(tmp_path / "out", compile_baseline=False, progress=lambda m: None).run(
        sorted(suite.glob("*.py")), OptimizeConfig(guard=fast_config(), budget=2), repeat=2
    )
    assert json.loads((tmp_path / "out" / "bench.json").read_text()) == out
    assert len(out["repeats"]) == 2 and {r["run_id"] for r in out["repeats"]} != {None}
    assert out["correct_rate"] == 1.0 and out["evaluations"] == 2
    assert out["tasks"]["tiny"]["best_speedup"] > 0 and out["geomean_speedup_compile"] is None
    assert out["tasks"]["tiny"]["search_speedup"] > 0  # best_speedup is the confirmation's figure
    first = out["repeats"][0]
    done = kiln("report", first["out"], "--store", first["store"])  # the command `kiln bench` prints
    assert done.returncode == 0, done.stderr
    assert "attempt graph" in (Path(first["out"]) / "report.html").read_text().lower()
    assert "--no-compile" in out["compile_notes"]["tiny"]


def test_the_compile_ratio_of_an_identity_compiler_is_about_one_and_a_failing_one_is_none(suite):
    task = load_task(suite / "tiny.py")
    ratio, why = compile_ratio(task, threads=1, compiler=lambda model: model)
    assert 0.5 < ratio < 2.0 and why == ""

    def broken(model):
        raise RuntimeError("no backend here\nmore detail")

    ratio, why = compile_ratio(task, threads=1, compiler=broken)
    assert ratio is None and why == "torch.compile failed: RuntimeError: no backend here"


def test_the_best_s_reached_rate_is_on_its_workloads_bounding_term(tmp_path):
    from kernelkiln.bench.run import best_rate
    from kernelkiln.platforms.base import Peaks
    from kernelkiln.store.records import Attempt, Measurement
    from kernelkiln.testing.lowering import write_task

    task = write_task(tmp_path, "relu", "torch.relu(x)", {"B": 250, "N": 1000}, "[torch.randn(B, N)]")
    peaks = Peaks(bandwidth_gbs=20.0, gflops_fp32=100.0)
    best = Attempt(task_id="t", verdict="KEEP", measurements=[Measurement(workload="w0", t_cand_ms=0.2)])
    reached = best_rate(task, best, peaks)  # 2 MB read and written in 0.2 ms: 10 GB/s
    assert reached is not None and reached.bound == "memory"
    assert reached.rate == pytest.approx(10.0) and reached.fraction == pytest.approx(0.5)
    untimed = Attempt(task_id="t", verdict="KEEP", measurements=[Measurement(workload="w0")])
    assert best_rate(task, untimed, peaks) is None and best_rate(task, None, peaks) is None


def test_a_bench_runs_each_task_at_the_sizes_given_for_it(suite, tmp_path):
    out = Bench(tmp_path / "out", compile_baseline=False, progress=lambda m: None).run(
        sorted(suite.glob("*.py")), OptimizeConfig(guard=fast_config(), budget=1), repeat=1, sizes=[{"batch_size": 4}]
    )
    assert list(out["tasks"]) == ["tiny[batch_size=4]"] and out["correct_rate"] == 1.0
