"""A plain KernelBench file (no KILN op_family) gets its family from the reference's calls at load."""

from __future__ import annotations

import textwrap

import pytest

from kernelkiln.policy.lens import eligible_lenses
from kernelkiln.task import bundled_suites, load_task, loader
from kernelkiln.task.reference_calls import _calls_on, reference_calls
from kernelkiln.testing.tasks import TASKS


@pytest.mark.parametrize(
    "name, family",
    [
        ("plain_row_sum", "reduction"),
        ("plain_matmul", "matmul"),
        ("plain_softmax", "softmax"),
        ("plain_conv", "conv"),
        ("plain_matmul_relu", "fused_matmul"),
        ("tiny_linear", "matmul"),
    ],
)
def test_a_plain_kernelbench_file_gets_its_family_inferred(name, family):
    task = load_task(TASKS / f"{name}.py")
    assert task.op_family == family
    assert task.summary()["op_family"] == family  # what the store's TaskRecord is built from


def test_inference_runs_on_the_meta_device_so_kernelbench_sizes_cost_nothing():
    task = load_task(TASKS / "plain_matmul.py")  # N = 2048
    assert _calls_on(task, task.workloads[0], "meta") == ["matmul"]


def test_a_declared_family_is_kept_and_nothing_is_run_for_it(monkeypatch):
    def fail(task):
        raise AssertionError("inferred although KILN gives the family")

    monkeypatch.setattr(loader, "inferred_family", fail)
    assert load_task(TASKS / "tiny_relu.py").op_family == "elementwise"
    assert load_task(bundled_suites()["cpu"].path / "matmul_bias_gelu.py").op_family == "fused_matmul"


def test_bundled_tasks_keep_their_declared_families():
    for suite in bundled_suites().values():
        for path in suite.task_paths():
            task = load_task(path)
            declared = (getattr(task.module, "KILN", None) or {}).get("op_family")
            if declared is not None:
                assert task.op_family == declared, path


def write(tmp_path, forward, kiln=""):
    """A KernelBench-style file whose forward(self, x) is ``forward`` (x is 8 x 8)."""
    body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    path = tmp_path / "task.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        f"{body}\n\n\nn = 8\n\n\ndef get_inputs():\n    return [torch.randn(n, n)]\n\n\n"
        f"def get_init_inputs():\n    return []\n\n\n{kiln}\n"
    )
    return path


def test_a_forward_that_reads_values_is_recorded_on_cpu(tmp_path):
    path = write(
        tmp_path,
        """
        if float(x.sum()) > 1e9:  # no meta tensor has a value: this runs on CPU
            return x
        return x.amax(dim=1)
    """,
    )
    task = load_task(path)
    with pytest.raises(Exception):  # noqa: B017 - whichever error torch's meta run raises
        _calls_on(task, task.workloads[0], "meta")
    assert task.op_family == "reduction"
    assert "amax" in reference_calls(task)


def test_a_forward_that_fails_leaves_the_family_unknown_and_the_load_succeeds(tmp_path):
    task = load_task(write(tmp_path, "raise RuntimeError('boom')"))
    assert task.op_family is None


def test_a_guard_worker_does_not_infer():
    assert load_task(TASKS / "plain_row_sum.py", analyze=False).op_family is None


def test_explicit_kiln_family_wins_over_the_calls(tmp_path):
    assert load_task(write(tmp_path, "return x @ x", 'KILN = {"op_family": "reduction"}')).op_family == "reduction"
    assert load_task(write(tmp_path, "return x @ x")).op_family == "matmul"


def test_lens_eligibility_follows_the_inferred_family():
    """The GEMM-style tiling lens is offered to an inferred matmul, never to an unknown task."""
    inferred = load_task(TASKS / "plain_matmul.py").op_family
    unknown = load_task(TASKS / "plain_matmul.py", analyze=False).op_family
    assert "tiling" in {lens.name for lens in eligible_lenses(inferred)}
    assert "tiling" not in {lens.name for lens in eligible_lenses(unknown)}
