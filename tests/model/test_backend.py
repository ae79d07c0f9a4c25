"""``kernelkiln.backend``: the saved kernels inside ``torch.compile``'s graphs, and nothing where they do not fit."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import kernelkiln
from kernelkiln.errors import UserError
from kernelkiln.testing.models import activations, tiny_lm, tiny_mlp, tokens

from .conftest import save_generated


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def agrees(compiled, model, ids) -> bool:
    with torch.no_grad():
        return torch.allclose(compiled(*ids), model(*ids), atol=1e-4, rtol=1e-4)


def test_every_saved_region_runs_its_kernel_in_the_compiled_graph(lm, lm_saved):
    backend = kernelkiln.backend(lm_saved)
    model = tiny_lm(seed=2)
    compiled = torch.compile(model, backend=backend, dynamic=False)
    assert agrees(compiled, model, tokens())
    assert backend.found == [len(lm.part.regions)]


def test_a_model_whose_regions_read_folded_constants_runs_under_the_backend(gpt2, tmp_path):
    save_generated(gpt2, tmp_path)  # GPT-2's attention reads a causal mask built from arange
    backend = kernelkiln.backend(tmp_path)
    compiled = torch.compile(gpt2.model, backend=backend, dynamic=False)
    ids = gpt2.draw()
    with torch.no_grad():
        torch.testing.assert_close(compiled(*ids).logits, gpt2.model(*ids).logits, atol=1e-4, rtol=1e-4)
    assert backend.found and backend.found[0] > 0


def test_a_parameter_replaced_after_compiling_is_the_one_the_kernel_reads(lm_saved):
    model = tiny_lm()
    compiled = torch.compile(model, backend=kernelkiln.backend(lm_saved), dynamic=False)
    ids = tokens()
    assert agrees(compiled, model, ids)
    up = model.blocks[0].up
    up.weight = nn.Parameter(torch.randn_like(up.weight))
    assert agrees(compiled, model, ids)


def test_a_graph_without_the_saved_regions_is_compiled_untouched_and_said_once(lm_saved, capfd):
    backend = kernelkiln.backend(lm_saved)
    model = tiny_mlp()
    compiled = torch.compile(model, backend=backend, dynamic=False)
    x = activations()
    with torch.no_grad():
        torch.testing.assert_close(compiled(*x), model(*x))
        compiled(*x)
    assert backend.found == [0]
    assert capfd.readouterr().err.count("none of the regions the kernels saved in") == 1


def test_a_dynamic_graph_is_compiled_without_kernels_saying_how_to_get_them(lm_saved, capfd):
    backend = kernelkiln.backend(lm_saved)
    model = tiny_lm()
    compiled = torch.compile(model, backend=backend, dynamic=True)
    assert agrees(compiled, model, tokens())
    assert backend.found == [0] and "dynamic=False" in capfd.readouterr().err


def test_a_bad_inner_compiler_is_refused(lm_saved):
    with pytest.raises(UserError, match="inner must be"):
        kernelkiln.backend(lm_saved, inner="tvm")  # type: ignore[arg-type]


@pytest.mark.slow  # Inductor compiles C++ for what is left around the kernels' ops
def test_inductor_compiles_what_is_left_around_the_kernels(lm, lm_saved):
    backend = kernelkiln.backend(lm_saved, inner="inductor")
    model = tiny_lm()
    compiled = torch.compile(model, backend=backend, dynamic=False)
    assert agrees(compiled, model, tokens())
    assert backend.found == [len(lm.part.regions)]
