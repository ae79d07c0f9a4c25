"""A function over ctypes' parameter limit takes its scratch buffers as one arena."""

from __future__ import annotations

import re

import pytest

import kernelkiln.lowering as lowering
from kernelkiln.testing.lowering import mismatch, with_knobs, write_task

FORWARD = "self.b(torch.relu(self.a(x))).softmax(-1) + x.mean()"


def _task(tmp_path):
    init = "self.a = nn.Conv2d(8, 16, 3, padding=1)\nself.b = nn.Conv2d(16, 8, 3, padding=1)"
    return write_task(tmp_path, "task", FORWARD, {}, "[torch.randn(2, 8, 13, 17)]", init_body=init)


def _signature(source: str) -> list[str]:
    return re.search(r"'kiln_w0': 'void\(([^)]*)\)'", source)[1].split(", ")


@pytest.mark.parametrize("form", ["gemm", "direct", "blocked"])
def test_over_the_parameter_limit_the_scratch_buffers_are_one_arena(tmp_path, monkeypatch, form):
    task = _task(tmp_path)
    separate = _signature(lowering.generate(task).source)
    monkeypatch.setattr(lowering, "MAX_PARAMS", len(separate) - 1)
    source = lowering.generate(task).source
    arena = _signature(source)
    assert arena.count("uint8_t*") == 1 and len(arena) < len(separate)
    assert arena[:-3] == [t for t in separate if t.startswith("const ")] + ["float*"]  # inputs, then the output
    assert mismatch(task, with_knobs(source, CONV=form)) is None


def test_under_the_limit_each_scratch_buffer_is_its_own_parameter(tmp_path):
    source = lowering.generate(_task(tmp_path)).source
    assert "uint8_t*" not in _signature(source)
    assert "scratch +" not in source
