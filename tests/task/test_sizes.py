"""Size variables of KernelBench files as they are: derived values, tuples, levels and reference failures."""

from __future__ import annotations

import textwrap
import threading

import pytest
import torch

from kernelkiln.errors import UserError
from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.session import GuardSession
from kernelkiln.task import load_suite, load_task, parse_overrides

# A level-2 file: bias_shape is derived from out_channels at the top level.
LEVEL2 = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias

batch_size = 2
in_channels = 3
out_channels = 8
height, width = 10, 12
kernel_size = 3
bias_shape = (out_channels, 1, 1)

def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
"""

SHAPED = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x.view(batch_size, -1).sum(dim=1)  # reads module-level sizes at run time

batch_size = 4
input_shape = (32768,)
dims = [2, 3]
scale = 0.5
KILN = {"workloads": [{"batch_size": 2}, {"batch_size": 3, "input_shape": (16,)}]}

def get_inputs():
    return [torch.randn(batch_size, *input_shape)]

def get_init_inputs():
    return []
"""


def write(tmp_path, text, name="task.py"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_a_derived_value_follows_its_override_in_inputs_init_inputs_model_and_forward(tmp_path):
    task = load_task(write(tmp_path, LEVEL2), {"out_channels": 16})
    [w] = task.workloads
    assert w.sizes["bias_shape"] == (16, 1, 1) and task.size_vars["bias_shape"] == (8, 1, 1)
    assert task.init_inputs(w) == [3, 16, 3, (16, 1, 1)]
    assert task.module.bias_shape == (16, 1, 1)
    model = task.make_model(w, seed=0)
    with torch.no_grad():
        out = model(*task.make_inputs(w, seed=0))
    assert out.shape == (2, 16, 8, 10)


def test_tuple_unpacking_makes_each_name_a_settable_size(tmp_path):
    task = load_task(write(tmp_path, LEVEL2), {"height": 6, "width": 7})
    assert {"height", "width"} <= set(task.size_vars)
    [x] = task.make_inputs(task.workloads[0], seed=0)
    assert x.shape == (2, 3, 6, 7)


def test_a_tuple_size_is_settable_from_the_command_line(tmp_path):
    task = load_task(write(tmp_path, SHAPED), parse_overrides(["input_shape=(4096,)"]))
    assert task.size_vars["input_shape"] == (32768,) and task.size_vars["dims"] == [2, 3]
    assert [w.sizes["input_shape"] for w in task.workloads] == [(4096,), (4096,)]
    assert task.make_inputs(task.workloads[1], seed=0)[0].shape == (3, 4096)
    stored = load_task(task.path, {"input_shape": [4096]})  # a resumed run's overrides come back from JSON
    assert stored.overrides == {"input_shape": (4096,)} and stored.workloads[0].sizes == task.workloads[0].sizes


def test_each_kiln_workload_runs_in_a_module_at_its_own_sizes(tmp_path):
    task = load_task(write(tmp_path, SHAPED))
    small, other = task.workloads
    assert (small.sizes["batch_size"], other.sizes["input_shape"]) == (2, (16,))
    assert task.module.batch_size == 4  # the file's own sizes
    for w, rows in ((small, 2), (other, 3)):
        model = task.make_model(w, seed=0)
        assert model(*task.make_inputs(w, seed=0)).shape == (rows,)


def test_inputs_made_in_parallel_threads_match_those_made_one_at_a_time(tmp_path):
    task = load_task(write(tmp_path, SHAPED))
    expected = [task.make_inputs(w, seed=s)[0] for s in range(4) for w in task.workloads]
    got: dict[int, torch.Tensor] = {}

    def make(i: int) -> None:
        got[i] = task.make_inputs(task.workloads[i % 2], seed=i // 2)[0]

    threads = [threading.Thread(target=make, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(torch.equal(got[i], expected[i]) for i in range(8))


def test_names_that_are_not_sizes_are_not_settable(tmp_path):
    with pytest.raises(UserError, match="no such module-level size variable"):
        load_task(write(tmp_path, SHAPED), {"Model": 1})


def test_a_top_level_that_fails_at_the_sizes_set_is_one_line(tmp_path):
    text = LEVEL2 + "\nassert out_channels % 4 == 0, 'out_channels must be a multiple of 4'\n"
    with pytest.raises(UserError) as err:
        load_task(write(tmp_path, text), {"out_channels": 6})
    assert "top level fails at these sizes" in str(err.value) and "\n" not in str(err.value)


def test_a_reference_that_cannot_run_at_the_sizes_given_is_a_one_line_user_error(tmp_path):
    text = LEVEL2.replace("bias_shape = (out_channels, 1, 1)", "bias_shape = (8, 1, 1)")
    task = load_task(write(tmp_path, text), {"out_channels": 16})
    with pytest.raises(UserError) as err:
        GuardSession(task, GuardConfig(threads=1))
    message = str(err.value)
    assert "workload w0 (" in message and "out_channels=16" in message and "\n" not in message
    assert "the reference fails at these sizes: RuntimeError: The size of tensor a (16) must match" in message


def test_a_file_in_a_kernelbench_level_folder_gets_that_level_unless_kiln_says(tmp_path):
    assert load_task(write(tmp_path, LEVEL2, "level2/19_conv.py")).level == 2
    assert load_task(write(tmp_path, LEVEL2, "level3/1_conv.py")).level == 3
    assert load_task(write(tmp_path, LEVEL2 + "\nKILN = {'level': 1}\n", "level3/2_conv.py")).level == 1
    assert load_task(write(tmp_path, LEVEL2, "other/conv.py")).level == 1


def test_a_suite_lists_kernelbench_level_folders_after_its_own_files(tmp_path):
    for name in ("b.py", "_skip.py", "level2/2_b.py", "level1/9_z.py", "level1/1_a.py", "level4/x.py"):
        write(tmp_path, LEVEL2, name)
    paths = load_suite(tmp_path).task_paths()
    assert [p.relative_to(tmp_path).as_posix() for p in paths] == [
        "b.py",
        "level1/1_a.py",
        "level1/9_z.py",
        "level2/2_b.py",
    ]
