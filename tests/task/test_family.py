"""The op-family rule: torch/ATen op names -> one family, "mixed" when several main ones."""

from __future__ import annotations

import pytest

from kernelkiln.task.family import family_of, family_of_op


@pytest.mark.parametrize(
    "ops, family",
    [
        (["sum"], "reduction"),
        (["amax", "getitem"], "reduction"),
        (["matmul"], "matmul"),
        (["linear"], "matmul"),
        (["aten::addmm.default"], "matmul"),
        (["__rmatmul__"], "matmul"),
        (["softmax"], "softmax"),
        (["aten::_log_softmax.default"], "softmax"),
        (["layer_norm"], "norm"),
        (["rms_norm", "mul"], "norm"),
        (["conv2d"], "conv"),
        (["conv_transpose3d", "add"], "conv"),
        (["aten::convolution.default"], "conv"),
        (["max_pool2d"], "pooling"),
        (["adaptive_avg_pool2d"], "pooling"),
        (["cumsum"], "scan"),
        (["mse_loss"], "reduction"),
        (["relu"], "elementwise"),
        (["__add__", "mul_", "sigmoid", "size"], "elementwise"),
        (["transpose", "contiguous"], "transpose"),
        (["scaled_dot_product_attention"], "attention"),
        (["linear", "linear", "scaled_dot_product_attention", "linear"], "attention"),
        (["matmul", "transpose", "mul", "softmax", "matmul"], "attention"),  # softmax(q @ k.T * s) @ v
    ],
)
def test_each_family(ops, family):
    assert family_of(ops) == family


def test_elementwise_ops_never_make_a_task_mixed():
    assert family_of(["conv2d", "relu", "add", "mul"]) == "conv"
    assert family_of(["sum", "exp", "div"]) == "reduction"
    assert family_of(["transpose", "relu"]) == "elementwise"  # layout ops only decide when nothing else ran


def test_a_matmul_with_an_epilogue_is_fused_matmul():
    assert family_of(["linear", "relu"]) == "fused_matmul"
    assert family_of(["matmul", "add", "gelu"]) == "fused_matmul"


def test_several_main_families_are_mixed():
    assert family_of(["conv2d", "group_norm"]) == "mixed"
    assert family_of(["linear", "sum"]) == "mixed"
    assert family_of(["matmul", "softmax"]) == "mixed"  # one matmul then a softmax is not attention
    assert family_of(["scaled_dot_product_attention", "layer_norm"]) == "mixed"


def test_plumbing_and_unlisted_ops_say_nothing():
    assert family_of([]) is None
    assert family_of(["view", "reshape", "empty_like", "size"]) is None
    assert family_of(["sort"]) is None
    assert family_of(["sort", "sum"]) == "reduction"
    assert family_of_op("contiguous") is None and family_of_op("convert_element_type") is None
