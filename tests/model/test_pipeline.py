"""``optimize_model`` end to end on a tiny model: files written, winners spliced and checked, memory reused."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from kernelkiln.memory.memory import Memory
from kernelkiln.model.endtoend import assemble
from kernelkiln.model.pipeline import MIN_PER_TASK, ModelResult, optimize_model
from kernelkiln.model.report import read
from kernelkiln.model.shapes import Declared, declare
from kernelkiln.model.splice import Kernel
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.store import open_store
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.models import activations, tiny_mlp, tiny_mlp_shape, up_kernel


@dataclass
class Runs:
    model: torch.nn.Module
    first: ModelResult
    second: ModelResult
    out: tuple[Path, Path]
    said: list[str]


def config() -> OptimizeConfig:
    return OptimizeConfig(guard=fast_config(time_budget_s=0.3), confirm_time_budget_s=0.3)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Runs:
    """Two runs of ``TinyMLP`` over one store (its four regions are two tasks)."""
    folder = tmp_path_factory.mktemp("pipeline")
    model = tiny_mlp()
    torch.manual_seed(0)
    example = activations()
    said: list[str] = []
    results = []
    for k in (1, 2):  # the same model twice over one store
        memory = Memory(open_store(f"sqlite:///{folder / 's.db'}"))
        try:
            results.append(
                optimize_model(
                    model,
                    [Declared("", example, activations)],
                    folder / f"out{k}",
                    memory,
                    config(),
                    model_budget=4,
                    compilers=(),
                    say=said.append,
                )
            )
        finally:
            memory.store.close()
    return Runs(model, results[0], results[1], (folder / "out1", folder / "out2"), said)


@pytest.mark.slow  # the runs: two optimizer runs of two tasks each, some twenty seconds
def test_a_run_writes_the_task_files_and_the_report(runs):
    out, report = runs.out[0], runs.first.report
    tasks = sorted(p.name for p in (out / "tasks").glob("*.py"))
    assert len(tasks) == 2  # two identical blocks: an up-projection task and a down-projection task
    assert sorted(Path(r.task).name for r in report.regions) == tasks
    assert all(r.places == 2 for r in report.regions)
    assert read(out) == report
    assert json.loads((out / "model.json").read_text())["model"] == "TinyMLP"
    markdown = (out / "model.md").read_text()
    assert all(r.task in markdown for r in report.regions) and "## End to end" in markdown
    for row in report.regions:
        assert row.run and (out / row.run).is_dir()


@pytest.mark.slow  # the runs
def test_spliced_regions_were_confirmed_faster_and_the_model_agrees_with_eager(runs):
    report = runs.first.report
    (end,) = report.end_to_end
    for row in report.regions:
        assert row.status in ("spliced", "slower", "failed", "dropped")
        if row.status in ("spliced", "dropped"):
            assert row.speedup is not None and row.speedup > 1.0 and row.origin == "generated"
        if row.status == "dropped":  # a loaded machine: together slower than eager end to end, so none kept
            assert not end.kept and "not faster than eager end to end" in row.reason
    assert end.correct and end.failure == "" and end.trials == 5 and end.wide == 2  # activations: floating inputs
    assert end.compile_ms == {} and end.vs_compile == {} and end.fastest_compile == ""  # compilers=()
    assert end.eager_ms > 0 and end.spliced_ms > 0


@pytest.mark.slow  # the runs
def test_the_returned_model_runs_exactly_the_spliced_regions(runs):
    result = runs.first
    if not result.report.saved:  # every kernel dropped: the user's model handed back as eager runs it
        assert result.model is runs.model and result.report.handed_back == "eager"
        return
    assert result.report.handed_back == "spliced"  # compilers=(): no compiled form to choose
    nodes = result.model.graph.graph.nodes
    calls = [n for n in nodes if n.op == "call_function" and str(n.target).startswith("kiln.region_")]
    assert len(calls) == sum(r.places for r in result.report.regions if r.status == "spliced")
    assert result.model.model is runs.model
    x = activations()
    with torch.no_grad():
        torch.testing.assert_close(result.model(*x), runs.model(*x), atol=1e-4, rtol=1e-4)


@pytest.mark.slow  # the runs
def test_the_spliced_kernels_are_saved_and_load_into_a_fresh_model(runs):
    import kernelkiln

    report = runs.first.report
    if not any(r.status == "spliced" for r in report.regions):  # a loaded machine: no kernel beat torch
        assert report.saved == "" and not (runs.out[0] / "model").exists()
        return
    assert report.saved == "model" and "## Saved" in (runs.out[0] / "model.md").read_text()
    fresh = tiny_mlp(seed=5)
    loaded = kernelkiln.load_model(runs.out[0], fresh)
    calls = [n for n in loaded.graph.graph.nodes if str(n.target).startswith("kiln.region_")]
    assert len(calls) == sum(r.places for r in report.regions if r.status == "spliced")
    x = activations()
    with torch.no_grad():
        torch.testing.assert_close(loaded(*x), fresh(*x), atol=1e-4, rtol=1e-4)


@pytest.mark.slow  # the runs
def test_budgets_sum_to_the_reports_and_the_largest_share_goes_first(runs):
    report = runs.first.report
    assert report.budget == sum(r.budget for r in report.regions)
    for row in report.regions:
        assert row.budget >= MIN_PER_TASK and 0 < row.evaluations <= row.budget
    shares = [r.share for r in report.regions]
    assert shares == sorted(shares, reverse=True)  # largest share first
    assert 0 < sum(shares) <= 1


@pytest.mark.slow  # the runs
def test_the_first_run_learns_and_the_second_reuses_exactly(runs):
    assert runs.first.report.regions[0].memory == "new"  # an empty store
    assert [r.memory for r in runs.second.report.regions] == ["reused"] * len(runs.second.report.regions)
    assert all(e.correct for e in runs.second.report.end_to_end)


@pytest.mark.slow  # the runs
def test_progress_is_said_line_by_line(runs):
    assert runs.said[0] == "capturing TinyMLP with torch.export"
    assert "4 regions, 2 distinct; 0 operations stay in torch" in runs.said
    assert any(line.startswith("region 2/2: ") for line in runs.said)


WRONG = up_kernel("torch.zeros(x0.shape[0], 64)")


def test_a_kernel_that_disagrees_in_the_model_is_dropped_with_why():
    model, example, up, shape = tiny_mlp_shape()
    done = assemble(model, [shape], {up: Kernel(up, WRONG, "generated")}, (), lambda line: None)
    assert done.kernels == {} and done.kept == [False]
    assert done.failures[up].startswith("in the model: trial 0: output 0 is off by")
    assert done.model is model and done.handed == "eager"  # no kernel kept, no compile compared: eager
    with torch.no_grad():
        torch.testing.assert_close(done.model(*example), model(*example))


@pytest.mark.slow  # an optimizer run of two tasks
def test_kernels_slower_than_eager_together_are_dropped_and_the_model_runs_in_torch(tmp_path, monkeypatch):
    from kernelkiln.model import verify

    def slower(arms, rounds=15, batch_s=0.05):  # every round: the spliced model at half eager's speed
        per_round = tuple({name: (2.0 if name == "spliced" else 1.0) for name in arms} for _ in range(rounds))
        return verify.Timing(
            {n: r for n, r in per_round[0].items()},
            {n: 1.0 / r for n, r in per_round[0].items()},
            {n: (1.0 / r, 1.0 / r) for n, r in per_round[0].items()},
            rounds,
            per_round,
        )

    monkeypatch.setattr(verify, "time_arms", slower)
    model = tiny_mlp()
    memory = Memory(open_store(f"sqlite:///{tmp_path / 's.db'}"))
    try:
        result = optimize_model(
            model, declare(activations, {}), tmp_path / "out", memory, config(), model_budget=2, compilers=()
        )
    finally:
        memory.store.close()
    assert result.model is model and result.report.handed_back == "eager"  # the user's module, as it came
    assert result.report.saved == "" and not (tmp_path / "out" / "model").exists()
    (end,) = result.report.end_to_end
    assert not end.kept and end.vs_eager == 0.5
    assert all(r.status != "spliced" for r in result.report.regions)
    dropped = [r for r in result.report.regions if r.status == "dropped"]
    assert all("not faster than eager end to end" in r.reason for r in dropped)
    x = activations()
    with torch.no_grad():
        assert torch.equal(result.model(*x), model(*x))
