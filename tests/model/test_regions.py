"""Regions: a product and what follows it; identical blocks alike; weights' transposes pulled in; masks constant."""

from __future__ import annotations

import pytest

from kernelkiln.lowering.trace import op_name
from kernelkiln.model.taskfile import structure_key


def ancestors(node):
    seen, todo = set(), list(node.all_input_nodes)
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo += n.all_input_nodes
    return seen


def test_identical_blocks_give_regions_with_equal_structure_keys(lm):
    ups = [r for r in lm.part.regions if r.ops[0] == "addmm" and "gelu" in r.ops]
    assert len(ups) == 2
    first, second = ups
    assert {n.name for n in first.state}.isdisjoint(n.name for n in second.state)  # each its own block's weights
    assert structure_key(first) == structure_key(second)
    assert lm.groups[structure_key(first)] == ups  # one task serves both places
    assert len(lm.groups) < len(lm.part.regions)


def test_regions_of_different_computations_have_different_keys(lm):
    up = next(r for r in lm.part.regions if "gelu" in r.ops)
    head = next(r for r in lm.part.regions if r.ops[0] == "mm")
    assert structure_key(up) != structure_key(head)


def test_identical_gpt2_layers_share_their_tasks(gpt2):
    attention = [r for r in gpt2.part.regions if r.ops[0] == "scaled_dot_product_attention"]
    assert len(attention) == 2 and structure_key(attention[0]) == structure_key(attention[1])
    assert max(len(regions) for regions in gpt2.groups.values()) == 2


def test_an_op_without_a_lowering_stays_in_torch_with_its_reason(lm):
    left = [x for x in lm.part.left if op_name(x.node.target) == "embedding"]
    assert len(left) == 1 and "aten.embedding" in left[0].reason
    assert all("embedding" not in r.ops for r in lm.part.regions)


def test_weight_transposes_are_pulled_into_the_consuming_region(lm):
    products = [r for r in lm.part.regions if r.ops[0] in ("addmm", "mm")]
    assert len(products) == 5  # two per block and the head
    for region in products:
        (transpose,) = region.pulled
        assert op_name(transpose.target) == "permute" and transpose not in region.nodes
        weight = transpose.args[0]
        assert weight.op == "placeholder" and weight in region.state  # the region reads the weight itself
        assert transpose not in region.state and transpose not in region.inputs


def test_a_causal_mask_built_from_arange_becomes_a_region_constant(gpt2):
    attention = [r for r in gpt2.part.regions if r.ops[0] == "scaled_dot_product_attention"]
    for region in attention:
        (mask,) = region.constants
        assert region.nodes[0].args[3] is mask  # attention's mask argument
        made_from = ancestors(mask)
        assert any(op_name(n.target) == "arange" for n in made_from if n.op == "call_function")
        assert not any(n.op == "placeholder" for n in made_from)  # neither inputs nor weights
        assert mask not in region.inputs and mask not in region.state


def test_every_computing_node_is_in_one_region_or_left_in_torch(gpt2):
    placed = [n for r in gpt2.part.regions for n in r.nodes]
    assert len(placed) == len(set(placed))
    left = {x.node for x in gpt2.part.left}
    assert left.isdisjoint(placed)
    on_input = {n for n in gpt2.captured.graph.nodes if n.op == "placeholder" and n.name == "input_ids"}
    for n in gpt2.captured.graph.nodes:  # graph order: a node reads the input if one of its arguments does
        if n.op == "call_function" and any(a in on_input for a in n.all_input_nodes):
            on_input.add(n)
            check = op_name(n.target).startswith("_assert") and not n.users  # export's, computing nothing
            assert check or n in left or n in placed, n.name


@pytest.mark.parametrize("subject", ["gpt2", "bert"])
def test_a_region_binds_only_the_models_own_tensors_and_reads_what_torch_computes_as_inputs(subject, request):
    # GPT-2's position embedding is computed from a weight by an op left in torch at every call: an input, not
    # state a kernel would bind once (and re-bind at every call, or read stale after the weights change).
    s = request.getfixturevalue(subject)
    for region in s.part.regions:
        assert all(n.op == "placeholder" for n in region.state)
    first = s.part.regions[0]
    assert any(n.op == "call_function" and "embedding" in str(n.target) for n in first.inputs)
