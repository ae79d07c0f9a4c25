"""Recording the reference's torch ops and deriving the candidate's forbidden list."""

from __future__ import annotations

import pytest
import torch

from kernelkiln.guard import aliases
from kernelkiln.guard.reference_ops import PLUMBING, forbidden_ops, ops_of, record
from kernelkiln.task.calls import CallRecorder


class Mixed(torch.nn.Module):
    def forward(self, x, w):
        y = x.contiguous().view(x.shape[0], -1)
        return torch.relu(y @ w).sum(dim=1)


def test_compute_ops_are_recorded_and_plumbing_is_not_forbidden():
    ops = record(Mixed(), [torch.randn(4, 3), torch.randn(3, 2)])
    assert {"matmul", "relu", "sum", "contiguous", "view"} <= ops
    banned = forbidden_ops(ops, None, ())
    assert {"matmul", "mm", "linear", "einsum", "relu", "sum", "mean"} <= banned
    assert not banned & PLUMBING


def test_tasks_may_replace_or_narrow_the_list():
    assert forbidden_ops({"matmul", "relu"}, ["gelu"], ()) == {"gelu"}
    assert "relu" not in forbidden_ops({"matmul", "relu"}, None, ["relu"])


class Call(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, y):
        return self.fn(x, y)


X, Y = torch.rand(4, 4) + 0.5, torch.rand(4, 4) + 0.5


@pytest.mark.parametrize(
    "reference, spellings",
    [
        (lambda x, y: x * y, ["mul", "multiply", "imul"]),
        (lambda x, y: torch.multiply(x, y), ["mul", "multiply"]),
        (lambda x, y: x / y, ["div", "divide", "true_divide", "truediv", "itruediv"]),
        (lambda x, y: x - y, ["sub", "subtract", "rsub", "isub"]),
        (lambda x, y: torch.clamp(x, 0.7, 1.2), ["clip", "clamp_min", "clamp_max", "hardtanh", "relu6"]),
        (lambda x, y: torch.relu(x), ["relu", "clamp_min", "clamp", "clip", "threshold"]),
        (lambda x, y: torch.sigmoid(x), ["expit", "special_expit"]),
        (lambda x, y: torch.special.expit(x), ["sigmoid", "expit"]),
        (lambda x, y: torch.abs(x), ["absolute"]),
        (lambda x, y: torch.acos(x - 1), ["arccos"]),
        (lambda x, y: torch.matmul(x, y), ["mm", "linalg_matmul", "linear", "einsum"]),
        (lambda x, y: x.amax(1), ["max"]),
    ],
)
def test_every_alias_of_a_forbidden_op_is_forbidden(reference, spellings):
    banned = forbidden_ops(record(Call(reference), [X, Y]), None, ())
    assert set(spellings) <= banned, set(spellings) - banned
    assert not banned & PLUMBING


def test_an_explicit_list_is_closed_under_aliases_too():
    assert {"mul", "multiply"} <= forbidden_ops({"add"}, ["multiply"], ())


@pytest.mark.parametrize(
    "call",
    [
        lambda x, y: torch.multiply(x, y),
        lambda x, y: torch.mul(x, y),
        lambda x, y: x.multiply_(y),
        lambda x, y: y.__rmul__(x),
    ],
)
def test_an_alias_recorded_at_run_time_is_named_in_the_forbidden_set(call):
    recorder = CallRecorder()
    with recorder:
        call(X.clone(), Y)
    assert ops_of(recorder.calls) & forbidden_ops({"mul"}, None, ())


def test_allowed_ops_take_their_aliases_and_groups_off_the_list():
    assert not forbidden_ops({"mul"}, None, ["multiply"]) & {"mul", "multiply", "imul"}
    banned = forbidden_ops({"matmul", "relu"}, None, ["relu"])
    assert not banned & {"relu", "clamp_min", "clamp", "threshold"} and "matmul" in banned


def test_unrelated_ops_stay_allowed():
    banned = forbidden_ops({"mul"}, None, ())
    assert not banned & {"add", "div", "kron", "pow", "exp", "sum"}
    assert not forbidden_ops({"sub"}, None, ()) & {"diff", "add", "neg"}


def test_the_alias_table_comes_from_torch_and_leaves_its_rng_as_it_was():
    state = torch.random.get_rng_state()
    table = aliases._derive.__wrapped__()
    assert torch.equal(state, torch.random.get_rng_state())
    assert table == aliases.canonical_ops()
    assert table["multiply"] == {"mul"} and table["clip"] == {"clamp"} and table["true_divide"] == {"div"}
    assert table["expit"] == table["special_expit"] == {"sigmoid"} and table["arccos"] == {"acos"}


def test_modules_are_seen_through_to_their_functional_op():
    ops = record(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.GELU()), [torch.randn(2, 3)])
    assert {"linear", "gelu"} <= ops


def test_properties_are_recorded_by_their_own_names_so_x_T_counts_as_a_transpose():
    recorder = CallRecorder()
    x = torch.randn(3, 4)
    with recorder:
        x.shape  # noqa: B018
        x.T  # noqa: B018
    ops = ops_of(recorder.calls)
    assert {"shape", "t"} <= ops and "getset_descriptor" not in ops
