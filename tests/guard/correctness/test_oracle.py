"""The float64 oracle: when it stands for the exact result, and when the check falls back."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from kernelkiln.guard.correctness.oracle import Oracle, oracle_for


class _Linear(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(64, 8)

    def forward(self, x):
        return self.linear(x)


class _Random(nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x)


class _Float32Constant(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.randn(64, 8)  # a plain attribute: .double() leaves it float32

    def forward(self, x):
        return x @ self.weight


class _Float32Output(nn.Module):
    def forward(self, x):
        return x.float() * 2


class _Index(nn.Module):
    def forward(self, x):
        return x.argmax(1)


def _outputs(model: nn.Module, oracle: Oracle, x: torch.Tensor) -> list:
    return oracle.outputs(model, [x], [model(x)])


def test_a_deterministic_module_gets_a_float64_copy_made_once():
    model, oracle, x = _Linear(), Oracle(), torch.randn(16, 64)
    [value] = _outputs(model, oracle, x)
    copy = oracle.double
    [again] = _outputs(model, oracle, torch.randn(16, 64))
    assert oracle.note is None and oracle.double is copy
    assert value.dtype == torch.float64 and again.dtype == torch.float64
    assert torch.allclose(value, model(x).double(), atol=1e-5)
    assert model.linear.weight.dtype == torch.float32  # the reference itself is untouched


@pytest.mark.parametrize(
    "module, note",
    [
        (_Random, "the reference is random"),
        (_Float32Constant, "does not run in float64: RuntimeError"),
        (_Float32Output, "output 0 is torch.float32"),
        (_Index, "integer or bool outputs"),
    ],
)
def test_the_oracle_steps_aside_with_a_reason(module, note):
    oracle = Oracle()
    assert _outputs(module(), oracle, torch.randn(16, 64)) == [None]
    assert note in oracle.note


def test_rounding_once_more_moves_the_result_by_about_float32_precision_and_restores_the_parameters():
    model, oracle, x = _Linear(), Oracle(), torch.randn(16, 64)
    [value] = _outputs(model, oracle, x)
    before = [p.clone() for p in oracle.double.parameters()]
    [moved] = oracle.perturbed([x])
    change = float(((moved - value).abs() / value.abs().clamp_min(1e-3)).max())
    assert 1e-9 < change < 1e-5
    assert all(torch.equal(a, b) for a, b in zip(before, oracle.double.parameters(), strict=False))


def test_each_reference_module_has_one_oracle():
    model = _Linear()
    assert oracle_for(model) is oracle_for(model) and oracle_for(model) is not oracle_for(_Linear())
