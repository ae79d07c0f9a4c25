"""Depthwise convolutions (one input and one output channel per group): a window per channel."""

from __future__ import annotations

import pytest

from kernelkiln.lowering import generate
from kernelkiln.testing.lowering import layer_task, mismatch, with_knobs

DEPTHWISE = {
    "padded": ("nn.Conv2d(8, 8, 3, padding=1, groups=8)", "(2, 8, 13, 21)"),
    "strided_rectangular_no_bias": (
        "nn.Conv2d(6, 6, (3, 5), stride=2, padding=(1, 2), groups=6, bias=False)",
        "(2, 6, 15, 22)",
    ),
    "dilated_column_stride": (
        "nn.Conv2d(5, 5, 3, stride=(1, 3), padding=(2, 0), dilation=(2, 3), groups=5)",
        "(1, 5, 11, 29)",
    ),
    "kernel_wider_than_the_input": ("nn.Conv2d(4, 4, 7, padding=1, groups=4)", "(1, 4, 5, 9)"),
    "conv1d": ("nn.Conv1d(4, 4, 5, padding=2, groups=4)", "(2, 4, 37)"),
    "conv3d_strided": ("nn.Conv3d(3, 3, 3, stride=2, padding=1, groups=3)", "(1, 3, 7, 8, 19)"),
    # each output phase of a transposed one is a depthwise forward one
    "transposed": ("nn.ConvTranspose2d(4, 4, 4, stride=2, padding=1, groups=4)", "(2, 4, 9, 11)"),
}


@pytest.mark.parametrize("layer", DEPTHWISE.values(), ids=DEPTHWISE.keys())
def test_a_depthwise_convolution_is_a_window_per_channel_and_matches_the_reference(tmp_path, layer):
    task = layer_task(tmp_path, *layer, forward="torch.relu(self.c(x)) * 2")
    generated = generate(task)
    assert "window" in generated.kinds  # no pooling here: the convolution is the window
    assert mismatch(task, generated.source) is None
    assert mismatch(task, with_knobs(generated.source, CONV="direct")) is None  # the reduction over its taps


def test_a_channel_multiplier_is_not_depthwise_and_stays_a_product(tmp_path):
    # two output channels per input channel: each group is a product of two rows, not a window
    task = layer_task(tmp_path, "nn.Conv2d(4, 8, 3, groups=4)", "(2, 4, 9, 13)")
    generated = generate(task)
    assert "window" not in generated.kinds
    assert mismatch(task, generated.source) is None
