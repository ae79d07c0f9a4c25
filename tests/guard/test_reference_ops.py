"""Recording the reference's torch ops and deriving the candidate's forbidden list."""

from __future__ import annotations

import torch

from kernelkiln.guard.reference_ops import PLUMBING, forbidden_ops, record


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


def test_modules_are_seen_through_to_their_functional_op():
    ops = record(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.GELU()), [torch.randn(2, 3)])
    assert {"linear", "gelu"} <= ops


def test_properties_are_recorded_by_their_own_names_so_x_T_counts_as_a_transpose():
    import torch

    from kernelkiln.guard.reference_ops import OpRecorder

    recorder = OpRecorder()
    x = torch.randn(3, 4)
    with recorder:
        x.shape  # noqa: B018
        x.T  # noqa: B018
    assert {"shape", "t"} <= recorder.names and "getset_descriptor" not in recorder.names
