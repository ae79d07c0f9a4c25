"""How a convolution reads its input: taps that reach no input are cut, a few output positions read their
patches from a stored copy, and an elementwise input read at several taps is stored once."""

from __future__ import annotations

import math

import pytest

from kernelkiln.lowering import generate
from kernelkiln.lowering.graph import Matmul, Pointwise, Reduce, topological
from kernelkiln.lowering.schedule import plan
from kernelkiln.lowering.trace import trace
from kernelkiln.testing.lowering import layer_task, mismatch, with_knobs, write_task

FORMS = ["gemm", "direct", "blocked"]


def _multiply_adds(task) -> int:
    """The multiply-adds of the traced graph's products and sums over taps."""
    nodes = topological(trace(task, task.workloads[0]).graph.outputs)
    done = sum(math.prod(n.shape) * n.a.shape[-1] for n in nodes if isinstance(n, Matmul))
    return done + sum(n.arg.numel for n in nodes if isinstance(n, Reduce) and n.op == "sum")


CUT = {
    # padded by 1 over a 1x1 input: only the centre tap reads anything (ResNet's last stage on small images)
    "centre_only": ("nn.Conv2d(8, 16, 3, padding=1)", "(2, 8, 1, 1)", 2 * 16 * 8),
    # height: the first and last of five taps read only padding; width: every tap reaches some position
    "rectangular": ("nn.Conv2d(6, 12, 5, padding=2, bias=False)", "(1, 6, 2, 3)", 12 * 6 * 2 * 3 * 3 * 5),
    "strided_dilated": ("nn.Conv2d(4, 8, 3, stride=2, padding=2, dilation=2)", "(1, 4, 2, 2)", 8 * 4),
    "conv3d": ("nn.Conv3d(3, 5, 3, padding=1)", "(1, 3, 1, 4, 4)", 5 * 3 * 16 * 9),
}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("layer", "shape", "useful"), CUT.values(), ids=CUT.keys())
def test_a_tap_that_reaches_no_input_is_cut_from_the_kernel(tmp_path, layer, shape, useful, form):
    task = layer_task(tmp_path, layer, shape)
    source = generate(task).source
    assert mismatch(task, with_knobs(source, CONV=form)) is None
    if form == "gemm":  # every product left multiplies an element of the input (cut from the kernel: 3-9x more)
        assert _multiply_adds(task) == useful


def test_a_tap_every_position_reaches_is_kept(tmp_path):
    # 3x3 padded by 1 over 2x2: each tap reaches some output position, so the kernel stays 3x3
    task = layer_task(tmp_path, "nn.Conv2d(4, 8, 3, padding=1)", "(1, 4, 2, 2)")
    assert _multiply_adds(task) == 8 * 4 * 9 * 4


@pytest.mark.parametrize("form", FORMS)
def test_few_output_positions_read_their_patches_from_one_stored_copy(tmp_path, form):
    # 2x2 outputs: too few columns for the GEMM kernel, so each output is a dot over C*3*3; its patch row is
    # stored once (an im2col) and read in order, with no bounds test per tap
    task = layer_task(tmp_path, "nn.Conv2d(24, 16, 3, padding=1)", "(2, 24, 2, 2)", "torch.relu(self.c(x))")
    graph = trace(task, task.workloads[0]).graph
    temps = plan(graph, set()).temps
    assert [t.shape for t in temps if isinstance(t, Pointwise) and t.op == "store"] == [(2, 1, 4, 24 * 9)]
    assert mismatch(task, with_knobs(generate(task).source, CONV=form)) is None


def test_a_single_output_channel_reads_its_patches_in_place(tmp_path):
    # one output row: each patch element is read once anyway, so a copy would only add a pass
    task = layer_task(tmp_path, "nn.Conv2d(24, 1, 3, padding=1)", "(2, 24, 2, 2)")
    temps = plan(trace(task, task.workloads[0]).graph, set()).temps
    assert not any(isinstance(t, Pointwise) and t.op == "store" for t in temps)


DENSE = """
features = [x]
for norm, conv in zip(self.norms, self.convs):
    features.append(conv(torch.relu(norm(torch.cat(features, 1)))))
return torch.cat(features, 1)
"""


@pytest.mark.parametrize("form", FORMS)
def test_a_normalized_concatenation_read_at_several_taps_is_stored_once(tmp_path, form):
    # a DenseNet block: inlined, the BatchNorm and ReLU of the concatenation would run once per tap of the
    # 3x3 convolution, through every branch of the concatenation
    task = write_task(
        tmp_path,
        "task",
        DENSE,
        {},
        "[torch.randn(2, 8, 13, 11)]",
        init_body=(
            "self.norms = nn.ModuleList([nn.BatchNorm2d(8 + 4 * i) for i in range(3)])\n"
            "self.convs = nn.ModuleList([nn.Conv2d(8 + 4 * i, 4, 3, padding=1, bias=False) for i in range(3)])"
        ),
    )
    temps = plan(trace(task, task.workloads[0]).graph, set()).temps
    assert sum(isinstance(t, Pointwise) and t.op == "relu" for t in temps) == 3
    source = generate(task).source
    assert source.count("#ifdef CONV_blocked") == 3  # a stored input gives each its blocked form
    assert mismatch(task, with_knobs(source, CONV=form)) is None


def test_a_one_tap_convolution_reads_its_elementwise_input_inlined(tmp_path):
    # a 1x1 convolution's packing reads each element once: storing the ReLU first would add a pass
    task = layer_task(tmp_path, "nn.Conv2d(8, 16, 1)", "(2, 8, 9, 11)", "self.c(torch.relu(x))")
    temps = plan(trace(task, task.workloads[0]).graph, set()).temps
    assert not any(isinstance(t, Pointwise) and t.op == "relu" for t in temps)


FOLDED = {
    "padded": ("nn.Conv2d(32, 24, 3, padding=1)", "(4, 32, 5, 5)", (1, 24, 100)),
    "grouped_strided": ("nn.Conv2d(32, 32, 3, stride=2, padding=1, groups=2)", "(3, 32, 9, 11)", (2, 16, 90)),
    "conv3d": ("nn.Conv3d(16, 16, 3, padding=1)", "(2, 16, 3, 4, 4)", (1, 16, 96)),
}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("layer", "shape", "product"), FOLDED.values(), ids=FOLDED.keys())
def test_few_positions_per_image_make_one_product_over_every_image(tmp_path, layer, shape, product, form):
    # per image, 25 output positions are too few columns for a register tile; over 4 images they are 100
    task = layer_task(tmp_path, layer, shape, "torch.relu(self.c(x)) + 1")
    graph = trace(task, task.workloads[0]).graph
    assert [n.shape for n in topological(graph.outputs) if isinstance(n, Matmul)] == [product]
    assert mismatch(task, with_knobs(generate(task).source, CONV=form)) is None


def test_one_image_many_positions_or_few_columns_keep_a_product_per_image(tmp_path):
    for shape in ("(1, 32, 5, 5)", "(2, 32, 9, 9)", "(2, 32, 3, 3)"):  # one image; 81 positions; 2 x 9 columns
        task = layer_task(tmp_path, "nn.Conv2d(32, 24, 3, padding=1)", shape)
        products = [n for n in topological(trace(task, task.workloads[0]).graph.outputs) if isinstance(n, Matmul)]
        assert [p.shape[0] for p in products] == [int(shape[1])]


POINTWISE_INPUT = {
    "one_by_one": ("nn.Conv2d(16, 24, 1)", "(2, 16, 9, 40)", 1),
    "one_by_one_stride_2": ("nn.Conv2d(16, 24, 1, stride=2)", "(2, 16, 9, 40)", 2),
    # padded: the first and last output rows and columns read only padding (their runs keep the bounds test)
    "one_by_one_padded": ("nn.Conv2d(16, 24, 1, padding=1)", "(2, 16, 9, 40)", 1),
}


@pytest.mark.parametrize(("layer", "shape", "stride"), POINTWISE_INPUT.values(), ids=POINTWISE_INPUT.keys())
def test_a_1x1_convolution_packs_its_inlined_input_a_run_at_a_time(tmp_path, layer, shape, stride):
    # MobileNet's pointwise convolutions read the depthwise one's BatchNorm and ReLU where they pack it: a
    # run of columns inside the input is one loop with no bounds test per element, and the channel's scale
    # (a division and a square root) is computed once per packed row, not per element (2.2x slower)
    task = write_task(
        tmp_path,
        "task",
        "self.c(torch.relu(self.bn(x)))",
        {},
        f"[torch.randn{shape}]",
        init_body=f"self.bn = nn.BatchNorm2d(16)\nself.c = {layer}",
    )
    source = generate(task).source
    assert f"const int64_t yy = y0, xx = x0 + (r - r0) * {stride};" in source
    per_row = source[source.index("float* restrict row = bp + (js * kc + p) * NR;") :]
    assert "sqrtf(" in per_row[: per_row.index("for (int q = 0; q < runs; ++q)")]
    for form in FORMS:
        assert mismatch(task, with_knobs(source, CONV=form)) is None
