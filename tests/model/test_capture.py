"""Capture: the model's own tensors as placeholders, a cache refused with the fix, attention kept whole."""

from __future__ import annotations

import pytest
import torch

from kernelkiln.errors import UserError
from kernelkiln.lowering.trace import op_name
from kernelkiln.model.capture import capture
from kernelkiln.testing.models import gpt2_tokens, tiny_gpt2


def calls(captured, name: str) -> list[torch.fx.Node]:
    return [n for n in captured.graph.nodes if n.op == "call_function" and op_name(n.target) == name]


def test_parameters_are_the_models_own_tensors(lm):
    own = dict(lm.model.named_parameters(remove_duplicate=False))
    tensors = lm.captured.state_tensors(lm.model)
    assert set(tensors) == set(lm.captured.state) and tensors
    for placeholder, fqn in lm.captured.state.items():
        assert lm.captured.kinds[placeholder] == "parameter"
        assert tensors[placeholder] is own[fqn]  # the very object: nothing copied
        assert tensors[placeholder].data_ptr() == own[fqn].data_ptr()
    assert [name for name, kind in lm.captured.kinds.items() if kind == "input"] == ["ids"]


def test_a_tied_weight_is_one_placeholder_and_one_tensor(lm):
    assert lm.model.head.weight is lm.model.embed.weight
    (embedding,) = calls(lm.captured, "embedding")
    (mm,) = calls(lm.captured, "mm")  # the head: the only product without a bias
    transpose = mm.args[1]
    assert embedding.args[0] is transpose.args[0]  # both uses read one placeholder
    tensors = lm.captured.state_tensors(lm.model)
    tied = {name for name, fqn in lm.captured.state.items() if fqn in ("embed.weight", "head.weight")}
    assert {tensors[name].data_ptr() for name in tied} == {lm.model.embed.weight.data_ptr()}


def test_a_model_returning_a_key_value_cache_is_refused_naming_use_cache_false():
    model = tiny_gpt2(use_cache=True)
    with pytest.raises(UserError, match="use_cache=False") as refused:
        capture(model, gpt2_tokens())
    assert "\n" not in str(refused.value)


def test_attention_stays_one_op_in_the_captured_graph(gpt2):
    attention = calls(gpt2.captured, "scaled_dot_product_attention")
    assert len(attention) == 2  # one per layer, as the model runs it
    ops = {op_name(n.target) for n in gpt2.captured.graph.nodes if n.op == "call_function"}
    assert not ops & {"_softmax", "softmax", "bmm"}  # not spelled out as its formula
