"""Task files: each region a KernelBench task that loads, runs and lowers; the gate admits its generated candidate."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from kernelkiln.guard import GuardSession, gate
from kernelkiln.guard.reference_ops import forbidden_ops, reference_models
from kernelkiln.lowering import generate
from kernelkiln.model.capture import Captured, capture
from kernelkiln.model.profile import profile
from kernelkiln.model.regions import Region, partition
from kernelkiln.model.taskfile import (
    Unrenderable,
    align,
    render,
    render_workloads,
    shape_free_key,
    structure_key,
    workloads_key,
)
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.starts import GENERATED, starting_code
from kernelkiln.task import load_task
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.models import HIDDEN, SEQ, tiny_lm, tokens


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


# Two sequence lengths for TinyLM, the second equal to its width: a size that coincides with a fixed literal.
LENGTHS = (SEQ, HIDDEN)
NAMES = [f"seq={n}" for n in LENGTHS]


@dataclass
class Shapes:
    """TinyLM captured at each of ``LENGTHS``; its regions matched across the captures, each group's task file."""

    model: torch.nn.Module
    captures: list[Captured]
    groups: list[list[Region]]  # one region per capture, in LENGTHS' order
    tasks: list[Path]


@pytest.fixture(scope="module")
def shapes(tmp_path_factory) -> Shapes:
    model = tiny_lm()
    captures = [capture(model, tokens(seq=n)) for n in LENGTHS]
    by_key: list[dict[str, list[Region]]] = []
    for captured in captures:
        keyed: dict[str, list[Region]] = {}
        for region in partition(captured).regions:
            keyed.setdefault(shape_free_key(region), []).append(region)
        by_key.append(keyed)
    first, *others = by_key
    assert all(other.keys() == first.keys() for other in others)
    groups = [
        list(same) for key, regions in first.items() for same in zip(regions, *(o[key] for o in others), strict=True)
    ]
    folder = tmp_path_factory.mktemp("shapes")
    tasks = []
    for k, group in enumerate(groups):
        path = folder / f"region_{k:02d}.py"
        path.write_text(render_workloads(group, f"region {k}", names=NAMES))
        tasks.append(path)
    return Shapes(model, captures, groups, tasks)


def test_a_region_at_two_sequence_lengths_is_one_task_whose_workloads_have_each_captures_shapes(shapes):
    assert len(shapes.groups) == 6
    for group, path in zip(shapes.groups, shapes.tasks, strict=True):
        task = load_task(path, {})
        assert [w.name for w in task.workloads] == NAMES, path.name
        assert [w.sizes for w in task.workloads] == [{"S0": n} for n in LENGTHS], path.name
        for workload, region in zip(task.workloads, group, strict=True):
            with torch.no_grad():
                out = task.make_model(workload, seed=0)(*task.make_inputs(workload, seed=0))
            out = out if isinstance(out, tuple) else (out,)
            want = [tuple(o.meta["val"].shape) for o in region.outputs]
            assert [tuple(o.shape) for o in out] == want, (path.name, workload.name)


def test_the_lowering_makes_one_candidate_the_guard_finds_correct_at_both_lengths(shapes):
    ops = set()
    for group, path in zip(shapes.groups, shapes.tasks, strict=True):
        task = load_task(path, {})
        code, origin = starting_code(task, OptimizeConfig())
        assert origin == GENERATED, path.name
        with GuardSession(task, fast_config()) as guard:
            verdict = guard.evaluate(code, timed=False)
        assert verdict.correct, (path.name, verdict.reason)
        ops.update(group[0].ops)
    assert {"mm", "addmm", "native_layer_norm", "gelu", "add"} <= ops  # products, a norm, elementwise epilogues


def test_a_size_equal_to_a_fixed_width_in_one_workload_stays_a_literal_apart(shapes):
    norm = next(
        path for group, path in zip(shapes.groups, shapes.tasks, strict=True) if group[0].ops[0] == "native_layer_norm"
    )
    text = norm.read_text()
    assert f"[S0, {HIDDEN}]" in text and f"[{HIDDEN}]" in text  # (SEQ, HIDDEN) is S0; (HIDDEN, HIDDEN) is not


def test_each_integer_that_differs_is_named_by_its_tuple_of_values_in_order_of_first_appearance():
    found = align(["f(8, 16, 8, 4, -8)\n", "f(16, 32, 16, 4, -16)\n"], ["a", "b"])
    assert found.text == "f(S0, S1, S0, 4, -S0)\n"
    assert found.sizes == {"S0": (8, 16), "S1": (16, 32)}  # 16 is S1 at a and S0 at b: two sizes, not one


def test_a_drawn_float_that_differs_keeps_the_first_workloads_value_and_an_operations_float_is_refused():
    drawn = align(
        ["def get_inputs():\n    return [f(8) * 0.5]\n", "def get_inputs():\n    return [f(4) * 0.25]\n"], ["a", "b"]
    )
    assert drawn.text == "def get_inputs():\n    return [f(S0) * 0.5]\n"
    with pytest.raises(Unrenderable, match="differs between the shapes: an operation's argument"):
        align(["def forward(x):\n    return f(x, 1e-05)\n", "def forward(x):\n    return f(x, 1e-06)\n"], ["a", "b"])


@pytest.mark.parametrize(
    "first, second",
    [
        ('f(x, "a")', 'f(x, "b")'),
        ("f(x, True)", "f(x, False)"),
        ("f(x, 1)", "g(x, 1)"),
        ("f(x, 1)", "f(x, 1, 2)"),
        ("f(x, 1)", "f(x, -1)"),
        ("f(x, 1)", "f(x, 1.5)"),
    ],
)
def test_anything_but_an_integer_or_a_drawn_float_that_differs_is_refused(first, second):
    with pytest.raises(Unrenderable, match=r"^the region differs between the shapes: "):
        align([f"def forward(x):\n    return {first}\n", f"def forward(x):\n    return {second}\n"], ["a", "b"])


def test_one_region_renders_as_render_does(shapes):
    spreads = profile(shapes.captures[0], shapes.model).spreads
    for group in shapes.groups:
        assert render_workloads(group[:1], "one", [spreads], names=["only"]) == render(group[0], "one", spreads)


def test_regions_with_different_operations_are_refused(shapes):
    norm, product = (next(g[0] for g in shapes.groups if g[0].ops[0] == op) for op in ("native_layer_norm", "addmm"))
    with pytest.raises(Unrenderable, match=r"^the region differs between the shapes: line \d+ reads"):
        render_workloads([norm, product], "")


def test_the_file_at_its_first_workload_is_the_first_captures_own_with_the_spreads_it_had(shapes):
    spreads = [profile(c, shapes.model).spreads for c in shapes.captures]
    # Some input's spread differs between the lengths: the file draws it as the first capture did.
    assert any(render(g[1], "t", spreads[0]) != render(g[1], "t", spreads[1]) for g in shapes.groups)
    for group in shapes.groups:
        text = render_workloads(group, "t", spreads)
        body = text.split("\n\n\nKILN = ")[0].replace(f"\nS0 = {SEQ}\n", "").replace("S0", str(SEQ)) + "\n"
        assert body == render(group[0], "t", spreads[0])


def test_the_same_layer_at_the_same_shapes_shares_a_workloads_key_and_another_shape_does_not(shapes):
    ups = [g for g in shapes.groups if g[0].ops[:3] == ("addmm", "view", "gelu")]
    assert len(ups) == 2  # the two blocks' identical up-projections
    assert workloads_key(ups[0]) == workloads_key(ups[1]) != workloads_key(ups[0][::-1])
    assert shape_free_key(ups[0][0]) == shape_free_key(ups[0][1])
    assert structure_key(ups[0][0]) != structure_key(ups[0][1])
