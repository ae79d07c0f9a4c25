"""Products and convolutions: the GEMM kernel, its epilogue, its knobs, and the small-product fallbacks.

Sizes are odd so every sliver and block has a tail; the knob sweep's task has K past the
smallest KC and N past the smallest NC, so the accumulating and multi-block paths run.
"""

from __future__ import annotations

import math
import re

import pytest
import torch

from kernelkiln.lowering import gemm as G
from kernelkiln.lowering import generate
from kernelkiln.lowering import packing as P
from kernelkiln.lowering import views as V
from kernelkiln.lowering.graph import Input, Matmul, topological
from kernelkiln.lowering.trace import trace
from kernelkiln.native import BuildError
from kernelkiln.task import knobs as K
from kernelkiln.testing.lowering import layer_task, mismatch, run_candidate, with_knobs, write_task

PAIR = "[torch.randn(M, K), torch.randn(K, N)]"
S = {"M": 67, "K": 129, "N": 45}


def case(name: str, kinds: tuple[str, ...], forward: str, sizes: dict, inputs: str, **options):
    return pytest.param(kinds, dict(forward=forward, sizes=sizes, inputs=inputs, **options), id=name)


PRODUCTS = [
    case("square", ("gemm",), "torch.matmul(A, B)", {"M": 96, "K": 96, "N": 96}, PAIR, signature="A, B"),
    case("rectangular_odd", ("gemm",), "torch.matmul(A, B)", S, PAIR, signature="A, B"),
    case(
        "transposed_a", ("gemm",), "torch.matmul(A.T, B)", S, "[torch.randn(K, M), torch.randn(K, N)]", signature="A, B"
    ),
    case(
        "transposed_b", ("gemm",), "torch.matmul(A, B.T)", S, "[torch.randn(M, K), torch.randn(N, K)]", signature="A, B"
    ),
    case(
        "batched",
        ("gemm",),
        "torch.bmm(A, B)",
        {"b": 3, **S},
        "[torch.randn(b, M, K), torch.randn(b, K, N)]",
        signature="A, B",
    ),
    case(
        "batch_broadcast_against_a_matrix",
        ("gemm",),
        "torch.matmul(A, B)",
        {"b": 3, **S},
        "[torch.randn(b, M, K), torch.randn(K, N)]",
        signature="A, B",
    ),
    case(
        "addmm_with_beta_and_alpha",
        ("gemm",),
        "torch.addmm(C, A, B, beta=0.5, alpha=2.0)",
        S,
        "[torch.randn(M, N), torch.randn(M, K), torch.randn(K, N)]",
        signature="C, A, B",
    ),
    case(
        "baddbmm",
        ("gemm",),
        "torch.baddbmm(C, A, B)",
        {"b": 2, **S},
        "[torch.randn(b, M, N), torch.randn(b, M, K), torch.randn(b, K, N)]",
        signature="C, A, B",
    ),
    case(
        "linear_on_a_3d_input",
        ("gemm",),
        "self.fc(x)",
        {"B": 3, "T": 23, "I": 129},
        "[torch.randn(B, T, I)]",
        init_body="self.fc = nn.Linear(129, 45)",
    ),
    case(
        "matrix_vector",
        ("row",),
        "torch.matmul(A, B)",
        {"M": 67, "K": 129},
        "[torch.randn(M, K), torch.randn(K, 1)]",
        signature="A, B",
    ),
    case(
        "vector_matrix",
        ("column",),
        "torch.matmul(A, B)",
        {"K": 129, "N": 45},
        "[torch.randn(1, K), torch.randn(K, N)]",
        signature="A, B",
    ),
    # one row against a Linear's weight (stored K-contiguous): a row kernel per output reads each weight row
    # in order, where a column kernel's lanes would be a weight row apart (set-aliased at a power-of-two K)
    case(
        "linear_on_one_row",
        ("row",),
        "self.fc(x)",
        {"I": 129},
        "[torch.randn(1, I)]",
        init_body="self.fc = nn.Linear(129, 45)",
    ),
    case(
        "float64_is_a_reduction",
        ("row",),
        "torch.matmul(A, B)",
        S,
        "[torch.randn(M, K).double(), torch.randn(K, N).double()]",
        signature="A, B",
    ),
    case(
        "conv2d_padding_stride_dilation",
        ("gemm", "row"),
        "self.c(x)",
        {"B": 2},
        "[torch.randn(B, 5, 19, 17)]",
        init_body="self.c = nn.Conv2d(5, 12, 3, stride=2, padding=2, dilation=2)",
    ),
    case(
        "conv2d_groups_no_bias",
        ("gemm", "row"),
        "self.c(x)",
        {"B": 2},
        "[torch.randn(B, 6, 15, 13)]",
        init_body="self.c = nn.Conv2d(6, 24, (3, 5), padding=(1, 2), groups=3, bias=False)",
    ),
    case(
        "conv1d",
        ("gemm", "row"),
        "self.c(x)",
        {"B": 3},
        "[torch.randn(B, 7, 101)]",
        init_body="self.c = nn.Conv1d(7, 16, 5, padding=1)",
    ),
    # a short K under a few rows: each output's dot would be a few lanes and a horizontal sum; positions
    # innermost, each lane is an output (a ConvTranspose3d's phases with 4 channels ran 2.5x faster)
    case("short_k", ("column",), "torch.matmul(A, B)", {"M": 6, "K": 5, "N": 40}, PAIR, signature="A, B"),
    case(
        "transposed_3d_phases_few_channels",
        ("column",),
        "self.c(x)",
        {"B": 2},
        "[torch.randn(B, 3, 3, 6, 7)]",
        init_body="self.c = nn.ConvTranspose3d(3, 4, 3, stride=2, padding=1)",
    ),
    case(
        "sdpa",
        ("gemm", "row"),
        "F.scaled_dot_product_attention(q, k, v)",
        {"b": 2, "h": 3, "s": 37, "d": 24},
        "[torch.randn(b, h, s, d), torch.randn(b, h, s, d), torch.randn(b, h, s, d)]",
        signature="q, k, v",
    ),
    case(
        "sdpa_with_a_mask_buffer",
        ("gemm", "row"),
        "F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask)",
        {"b": 2, "h": 3, "s": 37, "d": 24},
        "[torch.randn(b, h, s, d), torch.randn(b, h, s, d), torch.randn(b, h, s, d)]",
        signature="q, k, v",
        init_body="self.register_buffer('mask', torch.ones(37, 37, dtype=torch.bool).tril())",
    ),
]


@pytest.mark.parametrize(("kinds", "spec"), PRODUCTS)
def test_a_product_matches_the_reference_on_fresh_inputs(tmp_path, kinds, spec):
    task = write_task(tmp_path, "task", **spec)
    generated = generate(task)
    assert set(kinds) <= set(generated.kinds)
    assert mismatch(task, generated.source) is None


def test_a_skinny_product_reads_a_in_place_and_its_last_partial_tile_stays_inside_a(tmp_path):
    # N = 8 <= NR on every CPU: A (1001 rows: the last tile partial) is read where it lies, never packed
    task = write_task(
        tmp_path,
        "task",
        "torch.relu(torch.matmul(A, B)) + 1",
        {"M": 1001, "K": 300, "N": 8},
        "[torch.randn(M, K), torch.randn(K, N)]",
        signature="A, B",
    )
    source = generate(task).source
    assert "#define KILN_MICRO kiln_micro_rows" in source
    assert mismatch(task, source) is None


def test_a_linear_layer_s_bias_and_gelu_run_as_the_gemm_s_epilogue(tmp_path):
    task = write_task(
        tmp_path,
        "task",
        "F.gelu(self.fc(x))",
        {"B": 64, "I": 100},
        "[torch.randn(B, I)]",
        init_body="self.fc = nn.Linear(100, 72)",
    )
    generated = generate(task)
    assert generated.kinds == ("gemm",) and generated.fused == 1  # one loop nest: no pass over C afterwards
    assert mismatch(task, generated.source) is None


def test_a_write_that_reads_the_product_transposed_is_not_fused_and_stays_correct(tmp_path):
    # y + y.T reads another tile's element: fused into the GEMM it would read C before it is final
    task = write_task(
        tmp_path,
        "task",
        "y = torch.matmul(A, B)\nreturn y + y.T",
        {"M": 70, "K": 90},
        "[torch.randn(M, K), torch.randn(K, M)]",
        signature="A, B",
    )
    generated = generate(task)
    assert generated.fused == 2
    assert mismatch(task, generated.source) is None


def test_a_reduction_of_the_product_reads_it_after_the_gemm(tmp_path):
    task = write_task(
        tmp_path,
        "task",
        "torch.sigmoid(self.fc(x)).sum(dim=1, keepdim=True)",
        {"B": 64, "I": 100},
        "[torch.randn(B, I)]",
        init_body="self.fc = nn.Linear(100, 72)",
    )
    generated = generate(task)
    assert generated.kinds == ("gemm", "row")
    assert mismatch(task, generated.source) is None


@pytest.mark.parametrize("forward", ["torch.any(x > 1.5, dim=1)", "torch.all(x > -2.0, dim=1)"], ids=["any", "all"])
def test_any_and_all_give_the_reference_s_booleans(tmp_path, forward):
    task = write_task(tmp_path, "task", forward, {"B": 37, "N": 203}, "[torch.randn(B, N)]")
    assert mismatch(task, generate(task).source) is None


def with_conv(source: str, form: str) -> str:
    """The candidate with its CONV knob set to ``form``."""
    return with_knobs(source, CONV=form)


# A transposed convolution is forward ones over its input, one per output phase, its weight swapped per group
# and flipped; a 3-d one reads patches over three dims. Each case is checked in both CONV forms.
SPREAD = {
    "transposed_2d_output_padding": (
        "nn.ConvTranspose2d(16, 24, 3, stride=2, padding=1, output_padding=1)",
        "(2, 16, 11, 13)",
    ),
    "transposed_2d_groups_dilation": (
        "nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), padding=(1, 0), dilation=(1, 2), groups=2)",
        "(2, 4, 5, 6)",
    ),
    "transposed_2d_padding_past_the_kernel": ("nn.ConvTranspose2d(8, 16, 3, padding=3, dilation=2)", "(2, 8, 9, 10)"),
    "transposed_1d": ("nn.ConvTranspose1d(4, 6, 5, stride=3, padding=2)", "(2, 4, 11)"),
    "conv3d": ("nn.Conv3d(8, 16, 3, padding=(1, 0, 1), dilation=(1, 2, 1))", "(2, 8, 6, 12, 9)"),
    "conv3d_stride": ("nn.Conv3d(3, 5, 3, stride=2, padding=1)", "(2, 3, 6, 7, 8)"),
    "transposed_3d": (
        "nn.ConvTranspose3d(16, 8, (3, 5, 3), stride=(2, 1, 2), padding=(0, 2, 1), groups=2, bias=False)",
        "(2, 16, 4, 5, 6)",
    ),
    # a phase no tap reaches (kernel 2 under stride 3): those positions hold only the bias
    "transposed_2d_taps_fewer_than_stride": ("nn.ConvTranspose2d(4, 6, 2, stride=3, padding=1)", "(2, 4, 5, 7)"),
    # stride and dilation sharing a factor: each phase's taps are every tap, at dilation 1 over the input
    "transposed_3d_dilation_shares_the_stride": (
        "nn.ConvTranspose3d(4, 6, 3, stride=2, padding=1, dilation=2, output_padding=1)",
        "(1, 4, 3, 4, 5)",
    ),
    "transposed_3d_stride_3_dilation_2": (
        "nn.ConvTranspose3d(3, 5, (4, 3, 2), stride=3, padding=(2, 0, 1), dilation=(2, 1, 3))",
        "(1, 3, 3, 4, 3)",
    ),
}


@pytest.mark.parametrize("form", ["gemm", "direct"])
@pytest.mark.parametrize("layer", SPREAD.values(), ids=SPREAD.keys())
def test_transposed_and_3d_convolutions_match_the_reference_in_both_conv_forms(tmp_path, layer, form):
    task = layer_task(tmp_path, *layer)
    source = generate(task).source
    chosen = with_conv(source, form)
    assert re.search(r"^CONV = ", source, re.M) and f"CONV = {form!r}" in chosen
    assert mismatch(task, chosen) is None


# CONV=blocked: a stride-1 convolution's register-blocked direct form (lowering.conv_blocked); the tails of
# both the output channels (13, 12 rows against MR) and the output row (NR columns) are covered.
BLOCKED = {
    "few_channels": ("nn.Conv2d(8, 16, 3)", "(2, 8, 20, 21)"),
    "three_inputs_padded": ("nn.Conv2d(3, 32, 3, padding=1)", "(2, 3, 17, 40)"),
    "dilated_rectangular_no_bias": (
        "nn.Conv2d(5, 12, (3, 5), padding=(2, 1), dilation=(2, 1), bias=False)",
        "(3, 5, 19, 33)",
    ),
    "pointwise_odd_channels": ("nn.Conv2d(8, 13, 1)", "(2, 8, 9, 70)"),
    "conv1d": ("nn.Conv1d(7, 16, 5, padding=2)", "(3, 7, 101)"),
    "conv3d_padded": ("nn.Conv3d(4, 13, 3, padding=1)", "(2, 4, 5, 6, 21)"),
    "conv3d_dilated_rectangular": (
        "nn.Conv3d(3, 8, (2, 3, 3), padding=(1, 0, 2), dilation=(2, 1, 1), bias=False)",
        "(1, 3, 6, 7, 35)",
    ),
    "conv3d_one_tap_deep": ("nn.Conv3d(3, 16, (3, 3, 1))", "(1, 3, 13, 9, 10)"),  # KernelBench level 1's 59
    # each phase of a stride-2 transposed convolution is a stride-1 forward one over the stored input
    "transposed_2d_stride_2": ("nn.ConvTranspose2d(8, 16, 4, stride=2, padding=1)", "(2, 8, 9, 19)"),
    "transposed_3d_stride_2": ("nn.ConvTranspose3d(6, 8, 3, stride=2, padding=1, output_padding=1)", "(1, 6, 3, 4, 9)"),
    # per (image, group): the scratch holds the group's channels
    "grouped": ("nn.Conv2d(8, 12, 3, padding=1, groups=2)", "(2, 8, 13, 21)"),
    "grouped_transposed_3d": ("nn.ConvTranspose3d(16, 16, 3, stride=2, padding=1, groups=2)", "(2, 16, 8, 8, 8)"),
}


@pytest.mark.parametrize("layer", BLOCKED.values(), ids=BLOCKED.keys())
def test_a_stride_1_convolution_s_blocked_form_matches_the_reference_with_its_epilogue(tmp_path, layer):
    task = layer_task(tmp_path, *layer, forward="torch.relu(self.c(x)) + 1")
    source = generate(task).source
    assert "'CONV': ['gemm', 'direct', 'blocked']" in source
    assert "CONV = 'blocked'" in source  # every product a blocked convolution: the seed starts there
    assert mismatch(task, source) is None


@pytest.mark.parametrize(
    "layer, shape, useful",
    [
        # every output position's taps, counted once: per dim, stride 2 and kernel 3 leave 1 or 2 taps a phase
        ("nn.ConvTranspose3d(16, 24, 3, stride=2, padding=1)", (1, 16, 6, 6, 6), 16 * 24 * 27 * 6**3),
        ("nn.ConvTranspose2d(16, 24, 4, stride=2, padding=1)", (2, 16, 11, 13), 2 * 16 * 24 * 16 * 11 * 13),
    ],
)
def test_a_strided_transposed_convolution_multiplies_no_tap_by_a_spread_zero(layer, shape, useful, tmp_path):
    # read as one convolution over its input spread `stride` apart, 3 in 4 (2-d) or 7 in 8 (3-d) of the
    # products' multiply-adds were by zero
    task = layer_task(tmp_path, layer, shape)
    graph = trace(task, task.workloads[0]).graph
    products = [n for n in topological(graph.outputs) if isinstance(n, Matmul)]
    assert products
    done = sum(math.prod(p.shape) * p.a.shape[-1] for p in products)
    assert useful <= done <= useful * 1.3  # positions past the output's end, computed then dropped


@pytest.mark.parametrize("form", ["gemm", "direct", "blocked"])
def test_an_activation_between_two_convolutions_is_stored_once_so_both_take_the_blocked_form(tmp_path, form):
    # inlined where the second convolution reads its patches, the ReLU would run per tap and leave that
    # convolution no stored input for its blocked form
    task = write_task(
        tmp_path,
        "task",
        "self.b(torch.relu(self.a(x)))",
        {},
        "[torch.randn(2, 8, 13, 17)]",
        init_body="self.a = nn.Conv2d(8, 16, 3, padding=1)\nself.b = nn.Conv2d(16, 8, 3, padding=1)",
    )
    source = generate(task).source
    assert source.count("#ifdef CONV_blocked") == 2
    assert mismatch(task, with_conv(source, form)) is None


def test_a_linear_layer_on_a_3d_input_takes_its_bias_activation_and_residual_as_its_epilogue(tmp_path):
    # the product is (B * T, C): bias and activation read it through a reshape to (B, T, C)
    task = write_task(
        tmp_path,
        "task",
        "x + torch.tanh(self.fc(x))",
        {"B": 3, "T": 37, "C": 40},
        "[torch.randn(B, T, C)]",
        init_body="self.fc = nn.Linear(40, 40)",
    )
    generated = generate(task)
    assert generated.kinds == ("gemm",) and generated.fused == 1  # no pass over the product afterwards
    assert mismatch(task, generated.source) is None


def test_a_convolution_the_blocked_form_cannot_compute_does_not_offer_it(tmp_path):
    task = write_task(
        tmp_path,
        "task",
        "self.c(x)",
        {},
        "[torch.randn(2, 4, 17, 17)]",
        init_body="self.c = nn.Conv2d(4, 8, 3, stride=2)",
    )
    source = generate(task).source
    assert "'CONV': ['gemm', 'direct']" in source and "CONV_blocked" not in source


def test_packing_reads_each_operand_along_its_contiguous_dim():
    x = Input((8, 16), "float")
    assert P._contiguous(x, ("i", "p")) == "p"  # A (M, K) row-major: along K
    assert P._contiguous(V.transpose(x, 0, 1), ("p", "j")) == "p"  # B = x.T: along K too
    assert P._contiguous(Input((16, 8), "float"), ("p", "j")) == "j"  # B (K, N) row-major: along N
    x3 = Input((4, 8, 16), "float")
    assert P._contiguous(V.reshape(V.transpose(x3, 1, 2), (4, 16, 8)), ("b", "p", "j")) == "p"


def test_a_convolution_s_patches_are_packed_from_tap_and_position_tables_and_other_operands_are_not():
    from kernelkiln.lowering.graph import Patches

    x = Input((2, 3, 9, 9), "float")
    patches = Patches((2, 3, 3, 3, 7, 7), "float", base=x, stride=(1, 1), padding=(0, 0), dilation=(1, 1))
    found = P._patches_at(V.reshape(patches, (2, 27, 49)), ("b", "pc + p", "j"))
    assert found is not None and found[0] is patches
    # the column must not reach the tap (nor the row the position): a transposed im2col is packed per element
    assert P._patches_at(V.transpose(V.reshape(patches, (2, 27, 49)), 1, 2), ("b", "pc + p", "j")) is None
    assert P._patches_at(Input((27, 49), "float"), ("pc + p", "j")) is None


def test_register_tiles_follow_the_cpu_s_vector_registers(monkeypatch):
    monkeypatch.setattr(G, "cpu_flags", lambda: frozenset({"avx", "avx2", "fma", "avx512f"}))
    options, defaults = G.gemm_vocabulary()
    assert all(n % 16 == 0 for n in options["NR"]) and defaults["NR"] == 32  # zmm: 16 floats
    monkeypatch.setattr(G, "cpu_flags", lambda: frozenset({"avx", "avx2", "fma"}))
    options, defaults = G.gemm_vocabulary()
    assert all(n % 8 == 0 for n in options["NR"]) and (defaults["MR"], defaults["NR"]) == (6, 16)
    monkeypatch.setattr(G, "cpu_flags", lambda: frozenset({"neon"}))
    assert G.gemm_vocabulary()[1]["NR"] % 4 == 0


# K = 16*3*3 = 144 > the smallest KC, N = OH*OW = 576 > the smallest NC, M = 13 rows: every path has a tail.
CONV = {
    "forward": "torch.relu(self.c(x))",
    "sizes": {"B": 2},
    "inputs": "[torch.randn(B, 16, 24, 24)]",
    "init_body": "self.c = nn.Conv2d(16, 13, 3, padding=1)",
}
GEMM_SWEEP = ["MR", "NR", "MC", "KC", "NC", "CONV", "THREADS"]


@pytest.fixture(scope="module")
def conv(tmp_path_factory):
    task = write_task(tmp_path_factory.mktemp("gemm_knobs"), "conv", **CONV)
    return task, generate(task, threads=2)


@pytest.mark.parametrize("name", GEMM_SWEEP)
def test_every_option_of_a_gemm_knob_still_gives_a_correct_kernel(conv, name):
    task, g = conv
    knob = {k.name: k for k in K.read_knobs(g.source)}[name]
    assert len(knob.options) > 1
    failures = []
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the parallel packing and the shared-out tiles run on two threads
    try:
        for option in knob.options:
            try:
                why = mismatch(task, K.apply(g.source, {name: option}), seeds=(1,))
            except BuildError as exc:
                why = f"does not build: {str(exc).splitlines()[0] if str(exc) else ''}"
            if why:
                failures.append(f"{name}={K.show(option)}: {why}")
    finally:
        torch.set_num_threads(threads)
    assert not failures


def test_two_workloads_of_the_same_shapes_share_one_gemm_function(tmp_path):
    same = {"M": 67, "K": 129, "N": 45}
    task = write_task(
        tmp_path,
        "task",
        "torch.matmul(A, B)",
        same,
        PAIR,
        signature="A, B",
        kiln={"workloads": [{"name": "a", **same}, {"name": "b", **same}]},
    )
    generated = generate(task)  # the GEMM's scratch buffers are named per function: not a difference
    assert generated.source.count("void kiln_w") == 1
    assert mismatch(task, generated.source) is None


def test_a_softmax_packed_as_an_operand_takes_the_edge_test_outside_the_loop_along_k(tmp_path):
    # softmax(x) @ w: the softmax is computed as A is packed; rows past the edge are tested once per row,
    # so the loop along k has no branch and vectorizes with the inlined exp
    task = write_task(
        tmp_path,
        "task",
        "torch.softmax(x, dim=-1) @ w",
        {"M": 50, "K": 70, "N": 40},
        "[torch.randn(M, K), torch.randn(K, N)]",
        signature="x, w",
    )
    source = generate(task).source
    lines = [line.strip() for line in source.splitlines()]
    edge = [k for k, line in enumerate(lines) if line == "if (i < ie) {"]
    assert edge and all(lines[k + 1] == "for (int64_t p = 0; p < kc; ++p) {" for k in edge)
    assert mismatch(task, source) is None


# a Linear's weight as B: 600 columns over two blocks of NC = 512 (the last partial), K = 300 over three of KC = 128
LINEAR = {
    "forward": "F.relu(self.fc(x))",
    "sizes": {"B": 37},
    "inputs": "[torch.randn(B, 300)]",
    "init_body": "self.fc = nn.Linear(300, 600)",
}


def _agrees(candidate, reference, inputs) -> bool:
    with torch.no_grad():
        return torch.allclose(candidate(*inputs), reference(*inputs), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("prepack", [0, 1])
def test_a_weight_packed_once_is_packed_again_after_an_in_place_write_to_it(tmp_path, prepack):
    task = write_task(tmp_path, "task", **LINEAR)
    source = generate(task).source
    assert "#if PREPACK" in source and "PREPACK" in {k.name for k in K.read_knobs(source)}
    namespace = run_candidate(K.apply(source, {"NC": 512, "KC": 128, "PREPACK": prepack}))
    w = task.workloads[0]
    reference, candidate = task.make_model(w, 0), task.make_model(w, 0, namespace["ModelNew"])
    x = task.make_inputs(w, 1)
    assert _agrees(candidate, reference, x)
    with torch.no_grad():  # what an optimizer step or load_state_dict does: the version counter moves
        for model in (reference, candidate.reference):
            model.fc.weight.mul_(-0.5)
    assert _agrees(candidate, reference, x)


def test_two_instances_with_different_weights_never_read_each_other_s_packed_weight(tmp_path):
    task = write_task(tmp_path, "task", **LINEAR)
    cls = run_candidate(generate(task).source)["ModelNew"]
    w = task.workloads[0]
    pairs = [(task.make_model(w, seed, cls), task.make_model(w, seed)) for seed in (0, 5)]
    x = task.make_inputs(w, 1)
    for _ in range(2):  # alternating: each call finds the other instance's packing in the function's buffer
        for candidate, reference in pairs:
            assert _agrees(candidate, reference, x)


def test_a_product_of_forward_s_inputs_is_packed_on_every_call(tmp_path):
    task = write_task(tmp_path, "task", "torch.matmul(A, B)", {"M": 67, "K": 129, "N": 45}, PAIR, signature="A, B")
    source = generate(task).source
    assert "PREPACK" not in {k.name for k in K.read_knobs(source)} and "#if PREPACK" not in source


@pytest.mark.parametrize("kc", [128, 512])
def test_a_batched_product_over_several_blocks_of_b_packs_each_batch_s_a_whole_once_and_matches(tmp_path, kc):
    # N = 1100: three NC-wide blocks of 512 (the last partial); M = 13 and K = 300 leave tails in every sliver
    task = write_task(
        tmp_path,
        "task",
        "torch.matmul(A, B)",
        {"M": 13, "K": 300, "N": 1100},
        "[torch.randn(3, M, K), torch.randn(3, K, N)]",
        signature="A, B",
    )
    source = generate(task).source
    assert "a_whole ? ap + pc * KILN_PAD(13) + ib * kc : ap" in source
    assert mismatch(task, K.apply(source, {"NC": 512, "KC": kc, "MR": 4})) is None
