"""Task files: each region a KernelBench task that loads, runs and lowers; the gate admits its generated candidate."""

from __future__ import annotations

import pytest
import torch

from kernelkiln.guard import gate
from kernelkiln.guard.reference_ops import forbidden_ops, reference_models
from kernelkiln.lowering import generate
from kernelkiln.model.profile import profile
from kernelkiln.model.taskfile import render, structure_key
from kernelkiln.task import load_task


@pytest.mark.parametrize("subject", ["lm", "gpt2"])
def test_every_rendered_task_loads_and_its_reference_runs(subject, request):
    s = request.getfixturevalue(subject)
    for key, path in s.tasks.items():
        region = s.groups[key][0]
        task = load_task(path, {})
        (workload,) = task.workloads
        with torch.no_grad():
            out = task.make_model(workload, seed=0)(*task.make_inputs(workload, seed=0))
        out = out if isinstance(out, tuple) else (out,)
        want = [tuple(o.meta["val"].shape) for o in region.outputs]
        assert [tuple(o.shape) for o in out] == want, path.name
        assert all(bool(torch.isfinite(o).all()) for o in out if o.is_floating_point())


def test_the_lowering_generates_a_candidate_for_every_gpt2_region(gpt2):
    for path in gpt2.tasks.values():
        generated = generate(load_task(path, {}))
        assert "class ModelNew" in generated.source, path.name


def test_generated_candidates_pass_the_gate_with_the_references_ops_forbidden(gpt2):
    masked = [key for key, regions in gpt2.groups.items() if regions[0].constants]
    assert masked  # attention, whose causal mask the task makes in get_init_inputs
    for path in gpt2.tasks.values():
        task = load_task(path, {})
        _, recorded = reference_models(task, seed=0)
        forbidden = forbidden_ops(recorded, task.forbidden_ops, task.allowed_ops)
        assert forbidden, path.name  # the reference computes: its ops are forbidden to the candidate
        source = generate(task).source
        assert "torch.ops" not in source, path.name
        assert gate.check(source, forbidden) == [], path.name


def test_the_gate_would_refuse_the_references_own_aten_calls(gpt2):
    # What the candidate must avoid: the task's forward spelled as the model's ATen calls.
    source = next(iter(gpt2.tasks.values())).read_text().replace("class Model(", "class ModelNew(")
    assert any("torch.ops" in issue.message for issue in gate.check(source))


def test_the_structure_key_ignores_the_weight_statistics(lm):
    first, second = [r for r in lm.part.regions if "gelu" in r.ops]
    with torch.no_grad():
        lm.model.blocks[1].up.weight.mul_(4.0)  # the second block's weights, spread four times wider
    try:
        spreads = profile(lm.captured, lm.model).spreads
    finally:
        with torch.no_grad():
            lm.model.blocks[1].up.weight.div_(4.0)
    assert render(first, "", spreads) != render(second, "", spreads)  # drawn with each block's own spread
    assert structure_key(first) == structure_key(second)


def test_a_task_draws_inputs_with_the_spread_the_model_had(lm):
    spreads = profile(lm.captured, lm.model).spreads
    head = next(r for r in lm.part.regions if r.ops[0] == "mm")
    (x,) = head.inputs
    path = lm.tasks[structure_key(head)].with_name("head_with_spreads.py")
    path.write_text(render(head, "head", spreads))
    task = load_task(path, {})
    (drawn,) = task.make_inputs(task.workloads[0], seed=0)
    want = spreads[x.name]
    assert want.std > 0
    assert float(drawn.std()) == pytest.approx(want.std, rel=0.5)
    assert float(drawn.mean()) == pytest.approx(want.mean, abs=0.5 * want.std)
