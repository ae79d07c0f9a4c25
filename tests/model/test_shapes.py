"""Declared shapes: parsed, matched across captures, one task per region serving them all, spliced at each."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import kernelkiln
from kernelkiln.errors import UserError
from kernelkiln.memory.memory import Memory
from kernelkiln.model.capture import capture
from kernelkiln.model.pipeline import ModelResult, optimize_model
from kernelkiln.model.regions import partition
from kernelkiln.model.shapes import declare, parse, places
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.store import open_store
from kernelkiln.task import load_task
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.models import tiny_lm, tokens


def test_shapes_parse_as_named_lists_of_sizes():
    assert parse(["seq=1,128", "batch=2"]) == {"seq": [1, 128], "batch": [2]}
    assert parse(["seq=8,8,16"]) == {"seq": [8, 16]}
    for bad in (["seq"], ["seq="], ["seq=a"], ["seq=0"], ["1x=2"], ["seq=1", "seq=2"]):
        with pytest.raises(UserError):
            parse(bad)


def test_every_combination_is_a_declared_shape_drawn_by_keyword():
    shapes = declare(lambda seq=4, batch=1: (torch.zeros(batch, seq),), {"seq": [1, 8], "batch": [1, 2]})
    assert [s.label for s in shapes] == ["seq=1, batch=1", "seq=1, batch=2", "seq=8, batch=1", "seq=8, batch=2"]
    assert [tuple(s.example[0].shape) for s in shapes] == [(1, 1), (2, 1), (1, 8), (2, 8)]
    assert all(tuple(s.draw()[0].shape) == tuple(s.example[0].shape) for s in shapes)
    (alone,) = declare(lambda: (torch.zeros(3),), {})
    assert alone.label == "" and alone.inputs() == ["float32[3]"]


def test_regions_line_up_across_shapes_place_by_place():
    model = tiny_lm()
    parts = [partition(capture(model, tokens(seq=s))) for s in (8, 16)]
    found = places(parts)
    assert len(found) == len(parts[0].regions) == len(parts[1].regions)
    assert all(sorted(p.regions) == [0, 1] for p in found)
    assert all(p.regions[0].ops == p.regions[1].ops for p in found)


@dataclass
class Run:
    model: torch.nn.Module
    result: ModelResult
    out: Path


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Run:
    out = tmp_path_factory.mktemp("shapes")
    model = tiny_lm()
    memory = Memory(open_store(f"sqlite:///{out / 's.db'}"))
    config = OptimizeConfig(guard=fast_config(time_budget_s=0.3), confirm_time_budget_s=0.3)
    try:
        result = optimize_model(
            model, declare(tokens, {"seq": [8, 16]}), out / "run", memory, config, model_budget=6, compilers=()
        )
    finally:
        memory.store.close()
    return Run(model, result, out / "run")


@pytest.mark.slow  # an optimizer run per task, some forty seconds
def test_each_task_carries_one_workload_per_declared_shape(run):
    report = run.result.report
    assert report.shapes == ["seq=8", "seq=16"]
    for row in report.regions:
        if row.status == "refused":
            continue
        task = load_task(run.out / row.task, {})
        assert [w.name for w in task.workloads] == ["seq=8", "seq=16"]
    assert [e.shape for e in report.end_to_end] == ["seq=8", "seq=16"]
    assert all(e.correct for e in report.end_to_end)


@pytest.mark.slow  # the run
def test_the_spliced_model_runs_kernels_at_every_declared_shape_and_torch_elsewhere(run, capfd):
    spliced = run.result.model
    kept = [e.kept for e in run.result.report.end_to_end]
    if not any(kept):  # a loaded machine: no kernel beat torch, the user's model is handed back
        assert spliced is run.model
        return
    assert [g is not None for g in spliced.graphs] == kept
    with torch.no_grad():
        for seq in (8, 16):
            ids = tokens(seq=seq)
            torch.testing.assert_close(spliced(*ids), run.model(*ids), atol=1e-4, rtol=1e-4)
        assert spliced.fallbacks == 0
        ids = tokens(seq=12)
        torch.testing.assert_close(spliced(*ids), run.model(*ids))
    assert spliced.fallbacks == 1 and "not a declared shape" in capfd.readouterr().err


@pytest.mark.slow  # the run
def test_the_saved_kernels_load_at_every_kept_shape(run):
    report = run.result.report
    if not report.saved:  # a loaded machine: no kernel beat torch
        return
    fresh = tiny_lm(seed=4)
    loaded = kernelkiln.load_model(run.out, fresh)
    assert len(loaded.graphs) == sum(e.kept for e in report.end_to_end)
    with torch.no_grad():
        for seq in (8, 16):
            ids = tokens(seq=seq)
            torch.testing.assert_close(loaded(*ids), fresh(*ids), atol=1e-4, rtol=1e-4)


def test_optimize_model_from_python_needs_an_input_function_for_shapes():
    with pytest.raises(UserError, match="make_inputs"):
        kernelkiln.optimize_model(tiny_lm(), shapes={"seq": [8, 16]})


def test_a_region_that_differs_at_one_shape_gets_its_own_place_and_the_rest_are_shared():
    from kernelkiln.testing.models import gpt2_tokens, tiny_gpt2

    model = tiny_gpt2()
    one = partition(capture(model, (gpt2_tokens()[0][:, :1],)))  # one token: attention builds no causal mask
    eight = partition(capture(model, gpt2_tokens()))
    found = places([one, eight])
    shared = [p for p in found if sorted(p.regions) == [0, 1]]
    alone = [p for p in found if len(p.regions) == 1]
    assert len(shared) + len(alone) == len(found) and shared and alone
    assert len(shared) + sum(1 for p in alone if 0 in p.regions) == len(one.regions)
    assert len(shared) + sum(1 for p in alone if 1 in p.regions) == len(eight.regions)
    assert all("scaled_dot_product_attention" in p.regions[w].ops for p in alone for w in p.regions)
