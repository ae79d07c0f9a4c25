"""A region's kernel judged against its region run eagerly and under each torch.compile configuration."""

from __future__ import annotations

import pytest

from kernelkiln.model import against, compilers, verify
from kernelkiln.model.splice import Kernel

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w0 = nn.Parameter(torch.randn(32, 16))

    def forward(self, x0):
        return torch.relu(x0 @ self.w0)


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
"""

KERNEL = TASK.replace("class Model(", "class ModelNew(")


def _timing(ms: dict[str, float]) -> verify.Timing:
    """Every round gives ``ms`` (milliseconds per call by arm)."""
    per_round = tuple({n: v / 1e3 for n, v in ms.items()} for _ in range(5))
    speedup = {n: ms["eager"] / v for n, v in ms.items()}
    return verify.Timing(per_round[0], speedup, {n: (x, x) for n, x in speedup.items()}, 5, per_round)


@pytest.fixture
def task(tmp_path):
    path = tmp_path / "region_00_mm.py"
    path.write_text(TASK)
    return path


def _fake_compile(monkeypatch, failing: str = "") -> None:
    def compile_at(model, example, name, *, spliced=False):
        if name == failing:
            return compilers.Compiled(name, None, "InductorError: no C++ compiler")
        return compilers.Compiled(name, lambda: model(*example), model=model)

    monkeypatch.setattr(compilers, "compile_at", compile_at)


def test_a_kernel_faster_than_eager_but_not_than_the_compiled_region_is_refused_naming_the_configuration(
    task, monkeypatch
):
    _fake_compile(monkeypatch)
    monkeypatch.setattr(verify, "time_arms", lambda arms: _timing({"eager": 4.0, "strongest": 1.0, "kernel": 2.0}))
    judged = against.judge(task, Kernel("k", KERNEL, "generated"), ("strongest",))
    assert judged.fastest == "strongest" and judged.vs_fastest == 0.5
    assert judged.failure.startswith("not faster than its region under torch.compile (strongest) beyond noise")


def test_a_kernel_faster_than_every_baseline_is_kept_and_a_configuration_that_fails_is_said(task, monkeypatch):
    _fake_compile(monkeypatch, failing="default")

    def time_arms(arms):
        assert list(arms) == ["eager", "strongest", "kernel"]  # the failed configuration is not timed
        return _timing({"eager": 4.0, "strongest": 3.0, "kernel": 1.5})

    monkeypatch.setattr(verify, "time_arms", time_arms)
    judged = against.judge(task, Kernel("k", KERNEL, "generated"), ("default", "strongest"))
    assert judged.failure == "" and judged.vs_fastest == 2.0 and judged.fastest == "strongest"
    assert judged.compile_error == {"default": "InductorError: no C++ compiler"}


def test_a_region_timed_on_a_machine_too_busy_to_measure_keeps_no_kernel(task, monkeypatch):
    _fake_compile(monkeypatch)
    blind = verify.Timing({}, {}, {}, 0, (), 15, "only 0 of 15 timing rounds were clean")
    monkeypatch.setattr(verify, "time_arms", lambda arms: blind)
    judged = against.judge(task, Kernel("k", KERNEL, "generated"), ("strongest",))
    assert judged.failure == "not measured against its baselines: only 0 of 15 timing rounds were clean"


@pytest.mark.slow  # torch.compile of a small region: a few seconds
def test_a_kernel_is_timed_against_its_region_really_compiled(task):
    judged = against.judge(task, Kernel("k", KERNEL, "generated"), ("default",))
    assert judged.compile_error == {} and set(judged.compile_ms) == {"default"}
    assert judged.kernel_ms is not None and judged.kernel_ms > 0 and judged.vs_fastest is not None
    # The kernel is the reference itself: never faster beyond noise than the faster of its two baselines.
    low, high = judged.interval or (0.0, 0.0)
    assert low <= high and (judged.failure == "") == (low > 1.0)
