"""`--shrink` and `--set` on the command line: the sizes chosen are printed; a reference that fails is one line."""

from __future__ import annotations

import textwrap

from kernelkiln.testing.cli import kiln

TASK = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, out_channels, bias_shape):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return x + self.bias

batch_size = 64
out_channels = 32
height, width = 16, 16
bias_shape = (32, 1, 1)

def get_inputs():
    return [torch.randn(batch_size, out_channels, height, width)]

def get_init_inputs():
    return [out_channels, bias_shape]
"""


def test_eval_and_optimize_help_teach_shrink():
    for command in ("eval", "optimize"):
        done = kiln(command, "--help")
        assert done.returncode == 0 and "--shrink" in done.stdout and "--shrink 8" in done.stdout


def test_eval_with_shrink_prints_the_sizes_it_chose(tmp_path):
    task = tmp_path / "task.py"
    task.write_text(textwrap.dedent(TASK).replace("bias_shape = (32, 1, 1)", "bias_shape = (out_channels, 1, 1)"))
    # The task file is its own candidate: it defines no ModelNew, so the gate rejects it at once.
    done = kiln(
        "eval",
        str(task),
        str(task),
        "--shrink",
        "4",
        "--set",
        "out_channels=32",
        "--threads",
        "1",
        "--isolation",
        "best-effort",
    )
    assert done.returncode == 0, done.stderr
    assert "kiln: --shrink 4: batch_size 64→16, height 16→4, width 16→4" in done.stderr


def test_eval_of_a_reference_that_fails_at_the_sizes_set_exits_2_with_one_line(tmp_path):
    task = tmp_path / "task.py"
    task.write_text(textwrap.dedent(TASK))
    done = kiln("eval", str(task), str(task), "--set", "out_channels=8", "--threads", "1", "--isolation", "best-effort")
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("kiln: error: ") and "the reference fails at these sizes: RuntimeError" in line
