"""FLOPs and bytes derived from a reference a task file leaves without them (kernelkiln.task.roofline)."""

from __future__ import annotations

import pytest

from kernelkiln.task import load_task
from kernelkiln.testing.lowering import write_task


def test_a_matmul_performs_two_flops_per_multiply_add_and_moves_its_operands_and_product_once(tmp_path):
    task = write_task(
        tmp_path,
        "mm",
        "torch.matmul(a, b)",
        {"M": 32, "K": 48, "N": 16},
        "[torch.randn(M, K), torch.randn(K, N)]",
        signature="a, b",
    )
    (w,) = task.workloads
    assert w.flops == pytest.approx(2 * 32 * 48 * 16)
    assert w.bytes == pytest.approx(4 * (32 * 48 + 48 * 16 + 32 * 16))


def test_elementwise_work_has_no_flops_and_a_linear_s_weight_and_bias_are_read_once(tmp_path):
    relu = write_task(tmp_path, "relu", "torch.relu(x)", {"B": 8, "N": 100}, "[torch.randn(B, N)]")
    assert (relu.workloads[0].flops, relu.workloads[0].bytes) == (None, 4 * 2 * 8 * 100)
    linear = write_task(
        tmp_path,
        "linear",
        "self.fc(x)",
        {"B": 8, "N": 100},
        "[torch.randn(B, N)]",
        init="[N]",
        args="n",
        init_body="self.fc = nn.Linear(n, 10)",
    )
    (w,) = linear.workloads
    assert w.flops == pytest.approx(2 * 8 * 100 * 10)
    assert w.bytes == pytest.approx(4 * (8 * 100 + 100 * 10 + 10 + 8 * 10))


def test_an_in_place_output_is_the_input_counted_once(tmp_path):
    task = write_task(tmp_path, "inplace", "x.mul_(2)", {"B": 8, "N": 100}, "[torch.randn(B, N)]")
    assert task.workloads[0].bytes == 4 * 8 * 100


def test_figures_the_task_gives_stand_and_a_guard_worker_derives_none(tmp_path):
    path = tmp_path / "given.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n"
        "KILN = {'flops': 7.0, 'bytes': 11.0}\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
        "def get_inputs():\n    return [torch.randn(8, 100)]\ndef get_init_inputs():\n    return []\n"
    )
    assert (load_task(path).workloads[0].flops, load_task(path).workloads[0].bytes) == (7.0, 11.0)
    plain = write_task(tmp_path, "plain", "torch.relu(x)", {"B": 8, "N": 100}, "[torch.randn(B, N)]")
    unanalyzed = load_task(plain.path, analyze=False).workloads[0]
    assert (unanalyzed.flops, unanalyzed.bytes) == (None, None)


def test_a_forward_the_meta_device_cannot_run_gives_no_figures(tmp_path):
    task = write_task(tmp_path, "item", "x * float(x.sum().item())", {"B": 8, "N": 100}, "[torch.randn(B, N)]")
    assert (task.workloads[0].flops, task.workloads[0].bytes) == (None, None)
