"""--shrink K: sizes divided by about K, kernel-like values and divisibility kept, the result checked."""

from __future__ import annotations

import textwrap

import pytest
import torch

from kernelkiln.errors import UserError
from kernelkiln.task import load_task
from kernelkiln.task import shrink as shrink_module
from kernelkiln.task.shrink import fit, parse_shrink, shrink

CONV = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, groups, num_groups, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=1, groups=groups)
        self.norm = nn.GroupNorm(num_groups, out_channels)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        return self.norm(self.conv(x)) + self.bias

batch_size = 128
in_channels = 48
out_channels = 96
height, width = 64, 64
kernel_size = 5
stride = 2
groups = 3
num_groups = 12
dropout_p = 0.25
bias_shape = (out_channels, 1, 1)

def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, groups, num_groups, bias_shape]
"""

ATTENTION = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x)[0].softmax(dim=dim)

batch_size = 16
seq_len = 512
embed_dim = 384
num_heads = 12
dim = 1
input_shape = (32768,)

def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]

def get_init_inputs():
    return [embed_dim, num_heads]
"""

FIXED = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x.view(x.shape[0], 4096).sum(dim=1)  # hard-codes the feature count

batch_size = 64
features = 4096

def get_inputs():
    return [torch.randn(batch_size, features)]

def get_init_inputs():
    return []
"""


def write(tmp_path, text, name="task.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def runs(path, overrides) -> bool:
    task = load_task(path, overrides)
    for w in task.workloads:
        with torch.no_grad():
            task.make_model(w, seed=0)(*task.make_inputs(w, seed=0))
    return True


def test_a_conv_file_shrinks_its_sizes_and_keeps_kernels_strides_groups_and_divisibility(tmp_path):
    path = write(tmp_path, CONV)
    chosen = shrink(path, 8)
    o = chosen.overrides
    assert (o["batch_size"], o["height"], o["width"]) == (16, 8, 8)
    assert not {"kernel_size", "stride", "groups", "num_groups", "dropout_p", "bias_shape"} & set(o)
    assert o["in_channels"] % 3 == 0 and o["out_channels"] % 12 == 0 and o["out_channels"] < 96
    assert runs(path, o)
    assert load_task(path, o).workloads[0].sizes["bias_shape"] == (o["out_channels"], 1, 1)  # derived: follows


def test_an_attention_file_keeps_its_heads_and_an_embedding_the_heads_divide(tmp_path):
    path = write(tmp_path, ATTENTION)
    o = shrink(path, 8).overrides
    assert (o["batch_size"], o["seq_len"], o["input_shape"]) == (2, 64, (4096,))
    assert "num_heads" not in o and "dim" not in o and o["embed_dim"] % 12 == 0
    assert runs(path, o)


def test_spatial_sizes_never_drop_below_the_kernel_size(tmp_path):
    o = shrink(write(tmp_path, CONV), 1000).overrides
    assert o["batch_size"] == 1 and o["height"] >= 5 and o["width"] >= 5


def test_set_values_win_over_shrink_and_the_line_names_what_changed(tmp_path):
    chosen = shrink(write(tmp_path, CONV), 8, {"batch_size": 3, "out_channels": 24})
    assert chosen.overrides["batch_size"] == 3 and chosen.overrides["out_channels"] == 24
    line = chosen.line(8)
    assert line.startswith("--shrink 8: ") and "height 64→8" in line and "batch_size" not in line


def test_when_the_reference_fails_at_k_the_sizes_that_are_not_batch_or_channels_shrink_less(tmp_path):
    text = CONV.replace("bias_shape = (out_channels, 1, 1)", "bias_shape = (96, 1, 1)")
    chosen = shrink(write(tmp_path, text), 8, {"out_channels": 96})
    assert "bias_shape" not in chosen.overrides and chosen.overrides["batch_size"] == 16
    assert chosen.line(8).endswith("(spatial and other sizes kept: at 8 the reference fails)")


def test_a_reference_that_runs_at_no_shrunk_size_is_one_line(tmp_path):
    with pytest.raises(UserError) as err:
        shrink(write(tmp_path, FIXED), 4)
    message = str(err.value)
    assert "--shrink 4 (batch_size=16, features=1024)" in message and "RuntimeError" in message
    assert "\n" not in message and "--set" in message


@pytest.mark.parametrize("k", [0, -2, float("nan")])
def test_shrink_takes_a_positive_number(tmp_path, k):
    with pytest.raises(UserError, match="positive number"):
        shrink(write(tmp_path, CONV), k)


# -- --shrink TIME: the factor chosen by the reference's forward time ------------------------
def _model_time(per_element_s: float):
    """A stand-in for timing the reference: seconds proportional to the input's size; it fails (None)
    where GroupNorm's 12 groups no longer divide the channels."""

    def timed(path, overrides):
        task = load_task(path, overrides, analyze=False)
        sizes = task.workloads[0].sizes
        if sizes["out_channels"] % 12:
            return None
        return sizes["batch_size"] * sizes["in_channels"] * sizes["height"] * sizes["width"] * per_element_s

    return timed


def test_a_time_target_picks_the_smallest_factor_whose_forward_is_that_fast(tmp_path, monkeypatch):
    monkeypatch.setattr(shrink_module, "_timed", _model_time(1e-9))  # full size: 128*48*64*64 elements, 25 ms
    chosen = fit(write(tmp_path, CONV), "5ms")
    factor, took = chosen.fitted
    assert took <= 5e-3 and 1 < factor < 8
    # the next factor down (x 1/sqrt(2)) would have been slower than the target
    assert _model_time(1e-9)(write(tmp_path, CONV), shrink(write(tmp_path, CONV), factor / 2**0.5).overrides) > 5e-3
    assert chosen.line("5ms").startswith("--shrink 5ms: ") and "the reference's forward takes" in chosen.line("5ms")


def test_a_time_target_already_met_at_full_size_changes_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(shrink_module, "_timed", _model_time(1e-12))
    chosen = fit(write(tmp_path, CONV), "1s")
    assert chosen.overrides == {} and chosen.fitted[0] == 1


def test_a_time_target_skips_factors_at_which_the_reference_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(shrink_module, "_timed", _model_time(1e-9))
    o = fit(write(tmp_path, CONV), "5ms").overrides
    assert o["out_channels"] % 12 == 0


def test_a_time_target_runs_the_real_reference(tmp_path):
    chosen = fit(write(tmp_path, CONV), "2s")  # generous: any machine runs the shrunk sizes this fast
    assert chosen.fitted is not None and runs(write(tmp_path, CONV), chosen.overrides)


@pytest.mark.parametrize(("text", "value"), [("8", 8.0), ("2.5", 2.5), ("20ms", "20ms"), ("0.5s", "0.5s")])
def test_shrink_takes_a_factor_or_a_time(text, value):
    assert parse_shrink(text) == value


@pytest.mark.parametrize("text", ["fast", "20 min", "0ms"])
def test_a_shrink_that_is_neither_a_factor_nor_a_time_is_one_line(text):
    with pytest.raises(UserError) as err:
        parse_shrink(text)
    assert "\n" not in str(err.value)


GROUPS_BY_DEFAULT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups=4, bias=True):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, bias=bias)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        return torch.mean(self.group_norm(self.conv(x)), dim=[2, 3, 4])


batch_size = 64
in_channels = 3
out_channels = 16
depth, height, width = 16, 32, 32
kernel_size = 4


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
"""


def test_a_group_count_the_constructor_takes_by_default_still_divides_the_shrunk_channels(tmp_path):
    # KernelBench level 2's 27_Conv3d_HardSwish_GroupNorm_Mean: num_groups=4 is nowhere at module level.
    path = write(tmp_path, GROUPS_BY_DEFAULT)
    o = shrink(path, 8).overrides
    assert o["out_channels"] % 4 == 0 and o["out_channels"] < 16
    assert runs(path, o)
