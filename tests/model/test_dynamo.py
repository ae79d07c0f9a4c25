"""Where torch.export fails, dynamo's graphs: captured, optimized, run under torch.compile, saved and loaded."""

from __future__ import annotations

import pytest
import torch

import kernelkiln
from kernelkiln.errors import UserError
from kernelkiln.memory.memory import Memory
from kernelkiln.model import artifact
from kernelkiln.model.capture import ExportFailed, capture
from kernelkiln.model.dynamo import capture_graphs
from kernelkiln.model.pipeline import optimize_model
from kernelkiln.model.regions import partition
from kernelkiln.model.shapes import declare
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.store import open_store
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.models import activations, branchy


def test_a_branch_on_data_fails_export_and_dynamo_captures_the_graphs_around_it():
    model = branchy()
    with pytest.raises(ExportFailed, match=r"torch.export could not capture"):
        capture(model, activations())
    graphs = capture_graphs(model, activations())
    assert len(graphs) == 2  # before the branch, and after it
    kinds = [sorted(set(g.kinds.values())) for g in graphs]
    assert all("parameter" in k and "input" in k for k in kinds)
    ops = [op for g in graphs for r in partition(g).regions for op in r.ops]
    assert ops.count("addmm") == 2


def test_a_model_dynamo_cannot_run_is_refused_in_one_line():
    class Broken(torch.nn.Module):
        def forward(self, x):
            return x @ torch.ones(3, 3)  # the example's width is 8

    with pytest.raises(UserError, match=r"neither torch.export nor dynamo could capture") as refused:
        capture_graphs(Broken(), activations())
    assert "\n" not in str(refused.value)


@pytest.mark.slow  # an optimizer run of the two products' tasks
def test_a_model_captured_through_dynamo_runs_its_kernels_compiled_and_loads_again(tmp_path):
    model = branchy()
    said: list[str] = []
    memory = Memory(open_store(f"sqlite:///{tmp_path / 's.db'}"))
    config = OptimizeConfig(guard=fast_config(time_budget_s=0.3), confirm_time_budget_s=0.3)
    try:
        result = optimize_model(
            model, declare(activations, {}), tmp_path / "out", memory, config, model_budget=4, compilers=(),
            say=said.append,
        )  # fmt: skip
    finally:
        memory.store.close()
    assert any("capturing it through dynamo" in line for line in said)
    (end,) = result.report.end_to_end
    assert end.correct
    x = activations()
    with torch.no_grad():
        torch.testing.assert_close(result.model(*x), model(*x), atol=1e-4, rtol=1e-4)
    if not result.report.saved:  # a loaded machine: no kernel beat torch
        return
    assert artifact.read(tmp_path / "out").capture == "dynamo"
    fresh = branchy(seed=1)
    loaded = kernelkiln.load_model(tmp_path / "out", fresh)
    with torch.no_grad():
        torch.testing.assert_close(loaded(*x), fresh(*x), atol=1e-4, rtol=1e-4)


def test_kernels_saved_from_dynamo_graphs_load_compiled_with_the_backend(tmp_path, capfd):
    from kernelkiln.lowering import generate
    from kernelkiln.model.shapes import Shape
    from kernelkiln.model.splice import Kernel
    from kernelkiln.model.taskfile import by_structure, render
    from kernelkiln.task import load_task

    model = branchy()
    example = activations()
    regions = by_structure([r for graph in capture_graphs(model, example) for r in partition(graph).regions])
    kernels = {}
    for key, found in regions.items():
        path = tmp_path / f"{key}.py"
        path.write_text(render(found[0], "a region"))
        kernels[key] = Kernel(key, generate(load_task(path, {})).source, "generated")
    (shape,) = declare(activations, {})
    artifact.save(tmp_path / "out", "Branchy", [Shape(shape, None, regions)], 1, kernels, "dynamo")
    fresh = branchy(seed=1)
    loaded = kernelkiln.load_model(tmp_path / "out", fresh)
    x = activations()
    with torch.no_grad():
        torch.testing.assert_close(loaded(*x), fresh(*x), atol=1e-4, rtol=1e-4)
    assert isinstance(loaded, torch._dynamo.eval_frame.OptimizedModule)
    assert "none of the regions" not in capfd.readouterr().err  # both graphs held saved regions
