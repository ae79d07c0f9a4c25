"""The Task record: inputs per seed, and the robustness trials' wider ones."""

from __future__ import annotations

import textwrap

import torch

from kernelkiln.task import load_task
from kernelkiln.testing.tasks import TASKS

MIXED = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, t, index, scale):
        return x[index] * scale + t.t().sum()

def get_inputs():
    return [torch.rand(6, 5), torch.randn(5, 3).t(), torch.randint(0, 6, (4,)), 2.0]

def get_init_inputs():
    return []
"""


def test_wider_inputs_keep_shapes_dtypes_layouts_and_leave_integers_and_scalars_alone(tmp_path):
    path = tmp_path / "mixed.py"
    path.write_text(textwrap.dedent(MIXED))
    task = load_task(path)
    plain, wide = task.make_inputs(task.workloads[0], 3), task.make_inputs(task.workloads[0], 3, wide=True)
    for p, w in zip(plain[:2], wide[:2], strict=False):
        assert w.shape == p.shape and w.dtype == p.dtype and w.stride() == p.stride()
        assert not torch.equal(w, p)
    assert torch.equal(wide[2], plain[2]) and wide[3] == 2.0


def test_wider_inputs_give_non_negative_inputs_negative_values_and_are_the_same_for_the_same_seed():
    task = load_task(TASKS / "tiny_relu.py")
    workload = task.workloads[0]
    assert bool((task.make_inputs(workload, 5)[0] >= 0).all())
    wide = task.make_inputs(workload, 5, wide=True)[0]
    assert bool((wide < 0).any()) and float(wide.abs().max()) > 1.0
    assert torch.equal(wide, task.make_inputs(workload, 5, wide=True)[0])
    assert not torch.equal(wide, task.make_inputs(workload, 6, wide=True)[0])
