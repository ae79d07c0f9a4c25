"""The one recorder of the torch functions a forward calls."""

from __future__ import annotations

import pytest
import torch

from kernelkiln.task.calls import CallRecorder, call_name, record_calls


class Twice(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x @ x) @ x


def test_calls_are_counted_by_name_in_the_order_of_their_first_call():
    calls = record_calls(Twice(), [torch.randn(3, 3)])
    assert list(calls.items()) == [("matmul", 2), ("relu", 1)]


def test_only_top_level_calls_are_recorded():
    calls = record_calls(torch.nn.Linear(3, 3), [torch.randn(2, 3)])
    assert set(calls) == {"linear"}  # not the addmm or t that linear runs inside


def test_a_recording_runs_without_autograd():
    seen = []

    class Grad(torch.nn.Module):
        def forward(self, x):
            seen.append(torch.is_grad_enabled())
            return x

    record_calls(Grad(), [torch.randn(2)])
    assert seen == [False] and torch.is_grad_enabled()


def test_a_recorder_stops_recording_when_its_block_ends_even_by_an_exception():
    recorder = CallRecorder()
    with pytest.raises(RuntimeError), recorder:
        torch.neg(torch.ones(1))
        raise RuntimeError("boom")
    torch.neg(torch.ones(1))
    assert recorder.calls["neg"] == 1


def test_properties_are_named_by_their_descriptor():
    assert call_name(torch.Tensor.T.__get__) == "T"
    assert call_name(torch.add) == "add"
