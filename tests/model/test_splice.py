"""Splicing: generated kernels in the model's graph as custom ops, over the model's own weights."""

from __future__ import annotations

import pytest
import torch

from kernelkiln.lowering import generate
from kernelkiln.model import splice as splice_module
from kernelkiln.model.capture import capture
from kernelkiln.model.regions import partition
from kernelkiln.model.splice import Kernel, SpliceError, load, splice
from kernelkiln.model.spliced import SplicedModel
from kernelkiln.model.taskfile import by_structure, render, structure_key
from kernelkiln.task import load_task
from kernelkiln.testing.models import activations, tiny_mlp


def generated(subject) -> dict[str, Kernel]:
    """The lowering's candidate for every task, as the pipeline splices a tuned winner."""
    return {key: Kernel(key, generate(load_task(path, {})).source, "generated") for key, path in subject.tasks.items()}


def spliced_model(subject, keys=None) -> SplicedModel:
    kernels = generated(subject)
    keys = list(kernels) if keys is None else keys
    graph = splice(subject.captured, {k: subject.groups[k] for k in keys}, {k: kernels[k] for k in keys})
    return SplicedModel(subject.model, [(subject.captured, graph)])


def logits(out):
    if hasattr(out, "logits"):
        return out.logits
    return out.last_hidden_state if hasattr(out, "last_hidden_state") else out


def region_calls(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    return [n for n in graph.nodes if n.op == "call_function" and str(n.target).startswith("kiln.region_")]


@pytest.fixture(scope="module")
def lm_spliced(lm):
    return spliced_model(lm)


@pytest.mark.parametrize("subject", ["lm", "gpt2", "bert"])
def test_spliced_generated_kernels_agree_with_eager(subject, request):
    s = request.getfixturevalue(subject)
    spliced = spliced_model(s)
    with torch.no_grad():
        for _ in range(2):  # the example's shapes, fresh values
            ids = s.draw()
            want, got = logits(s.model(*ids)), logits(spliced(*ids))
            assert got.shape == want.shape
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert spliced.fallbacks == 0


def test_the_spliced_model_holds_no_tensors_of_its_own(lm, lm_spliced):
    assert lm_spliced.model is lm.model
    own = {id(t) for t in [*lm.model.parameters(), *lm.model.buffers()]}
    assert {id(t) for t in [*lm_spliced.parameters(), *lm_spliced.buffers()]} <= own
    with torch.no_grad():
        lm_spliced(*lm.example)  # binds every place to the model's tensors
    pointers = {t.data_ptr() for t in lm.model.parameters()}
    places = [splice_module._PLACES[n.args[0]] for n in region_calls(lm_spliced.graph.graph)]
    assert places and all(p.bound is not None for p in places)
    for place in places:
        assert {t.data_ptr() for t in place.bound.parameters()} <= pointers


def test_a_weight_changed_in_place_is_seen_by_the_spliced_model(tmp_path):
    model, example = tiny_mlp(), activations()
    captured = capture(model, example)
    groups = by_structure(partition(captured).regions)
    kernels = {}
    for k, (key, regions) in enumerate(groups.items()):
        path = tmp_path / f"r{k}.py"
        path.write_text(render(regions[0], f"r{k}"))
        kernels[key] = Kernel(key, generate(load_task(path, {})).source, "generated")
    spliced = SplicedModel(model, [(captured, splice(captured, groups, kernels))])
    with torch.no_grad():
        before = spliced(*example)
        model.blocks[1].down.weight.mul_(-2.0)
        model.blocks[0].up.bias.add_(1.0)
        after, want = spliced(*example), model(*example)
    assert not torch.allclose(after, before)
    torch.testing.assert_close(after, want, atol=1e-4, rtol=1e-4)


def test_another_input_shape_runs_the_model_and_is_counted(lm, lm_spliced, capfd):
    other = torch.randint(0, 64, (1, 5))
    with torch.no_grad():
        got, want = lm_spliced(other), lm.model(other)
    assert got.shape == (1, 5, 64)
    torch.testing.assert_close(got, want, atol=0, rtol=0)  # the model itself ran
    assert lm_spliced.fallbacks == 1
    assert "fallbacks" in capfd.readouterr().err
    with torch.no_grad():
        lm_spliced(*lm.example)
    assert lm_spliced.fallbacks == 1  # the captured shape is not a fallback


def test_the_spliced_graph_calls_one_custom_op_per_region(lm, lm_spliced):
    calls = region_calls(lm_spliced.graph.graph)
    assert len(calls) == len(lm.part.regions)
    assert len({n.target for n in calls}) == len(lm.groups)  # one op per task, each place its own call
    assert {str(n.target) for n in calls} == {f"kiln.region_{key}.default" for key in lm.groups}
    left = {str(n.target) for n in lm_spliced.graph.graph.nodes if n.op == "call_function"}
    assert not {"aten.addmm.default", "aten.mm.default", "aten.native_layer_norm.default"} & left
    assert "aten.embedding.default" in left  # what has no lowering still runs in torch


def test_splicing_one_task_leaves_the_other_regions_in_torch(lm):
    key = next(k for k, regions in lm.groups.items() if len(regions) == 2)
    spliced = spliced_model(lm, [key])
    calls = region_calls(spliced.graph.graph)
    assert len(calls) == 2 and {str(n.target) for n in calls} == {f"kiln.region_{key}.default"}
    assert any(str(n.target) == "aten.mm.default" for n in spliced.graph.graph.nodes)
    with torch.no_grad():
        torch.testing.assert_close(spliced(*lm.example), lm.model(*lm.example), atol=1e-4, rtol=1e-4)


def test_torch_compile_sees_the_custom_ops(lm, lm_spliced):
    seen: list[str] = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    torch._dynamo.reset()
    compiled = torch.compile(lm_spliced, backend=backend, fullgraph=True)
    with torch.no_grad():
        got = compiled(*lm.example)
        want = lm.model(*lm.example)
    assert {s for s in seen if s.startswith("kiln.region_")} == {f"kiln.region_{key}.default" for key in lm.groups}
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_a_candidate_without_modelnew_is_refused():
    with pytest.raises(SpliceError, match="ModelNew"):
        load(Kernel("nomodel", "x = 1\n", "generated"))


def test_a_model_whose_argument_is_named_input_is_spliced(tmp_path):
    # nn.Sequential's forward takes `input`, a name the graph's copy renames (it shadows a builtin).
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.GELU()).eval()
    example = activations()
    captured = capture(model, example)
    assert "input" in captured.kinds
    (region,) = partition(captured).regions
    path = tmp_path / "r.py"
    path.write_text(render(region, "r"))
    key = structure_key(region)
    kernel = Kernel(key, generate(load_task(path, {})).source, "generated")
    spliced = SplicedModel(model, [(captured, splice(captured, {key: [region]}, {key: kernel}))])
    assert len(region_calls(spliced.graph.graph)) == 1
    with torch.no_grad():
        torch.testing.assert_close(spliced(*example), model(*example), atol=1e-4, rtol=1e-4)


def test_a_region_is_spliced_after_a_value_torch_makes_later_in_the_graph(bert):
    # BERT's embeddings: the region opens with word + token-type embeddings, then adds the position
    # embedding, which torch makes (a gather) after that first add.
    spliced = spliced_model(bert)
    first = bert.part.regions[0]
    assert any(
        list(bert.captured.graph.nodes).index(x) > list(bert.captured.graph.nodes).index(first.nodes[0])
        for x in [*first.inputs, *first.state]
    )
    assert len(region_calls(spliced.graph.graph)) == len(bert.part.regions)


def test_each_place_binds_its_candidate_once_across_calls(gpt2, monkeypatch):
    binds = []
    bind = splice_module._bind
    monkeypatch.setattr(splice_module, "_bind", lambda *a: binds.append(1) or bind(*a))
    spliced = spliced_model(gpt2)
    with torch.no_grad():
        for _ in range(3):
            spliced(*gpt2.draw())
    assert len(binds) == len(region_calls(spliced.graph.graph))  # once per place, not once per call
