"""Generated candidates compute what their references compute: one small task file per op family.

Sizes are small and odd (37×203, 3×11×97) so every loop has a tail; the ``parallel``
cases are just above the size where the kernels fork OpenMP threads (32768 elements),
so the parallel loops are compiled and run too. Outputs are compared on inputs drawn
with seeds the lowering never traced at.
"""

from __future__ import annotations

import pytest
import torch

from kernelkiln.lowering import generate
from kernelkiln.lowering.graph import Unsupported
from kernelkiln.testing.lowering import mismatch, run_candidate, write_task

R2 = "[torch.randn(B, N)]"
R3 = "[torch.randn(B, C, L)]"
R4 = "[torch.randn(B, C, H, W)]"
S2 = {"B": 37, "N": 203}
S3 = {"B": 3, "C": 11, "L": 97}
S4 = {"B": 3, "C": 5, "H": 9, "W": 13}
PAIR = "[torch.randn(B, N), torch.randn(B, N)]"
AFFINE = "with torch.no_grad():\n    {m}.weight.normal_()\n    {m}.bias.normal_()"


def case(name: str, kind: str, forward: str, sizes: dict, inputs: str, **options):
    """One task: ``kind`` is the kernel kind its lowering must use."""
    return pytest.param(kind, dict(forward=forward, sizes=sizes, inputs=inputs, **options), id=name)


CHAIN = case(
    "elementwise_chain_broadcasting_a_parameter",
    "row",
    "torch.clamp(torch.tanh(x * self.scale + self.bias), min=-0.5, max=0.75)",
    {"B": 2, "C": 5, "H": 13, "W": 29},
    R4,
    init="[C]",
    args="c",
    init_body="self.scale = nn.Parameter(torch.randn(1) + 1.0)\nself.bias = nn.Parameter(torch.randn(c, 1, 1))",
)

ACTIVATIONS = [
    case("gelu_erf", "row", "F.gelu(x)", S2, R2),
    case("gelu_tanh", "row", "F.gelu(x, approximate='tanh')", S2, R2),
    case("elu", "row", "F.elu(x, alpha=0.7)", S2, R2),
    case("selu", "row", "torch.selu(x)", S2, R2),
    case("leaky_relu", "row", "F.leaky_relu(x, negative_slope=0.03)", S2, R2),
    case("softplus", "row", "F.softplus(x)", S2, "[torch.randn(B, N) * 15]"),  # past its threshold of 20 too
    case("hardtanh", "row", "F.hardtanh(x, min_val=-0.6, max_val=0.9)", S2, R2),
    case("swish", "row", "x * torch.sigmoid(x)", S2, R2),
]

REDUCTIONS = [
    case("sum_over_dim_1_of_3d", "column", "torch.sum(x, dim=1)", S3, R3),
    case("mean_keepdim", "row", "torch.mean(x, dim=2, keepdim=True)", S3, R3),
    case("max_values", "column", "torch.max(x, dim=1).values", S3, R3),
    case("min_values", "row", "torch.min(x, dim=2)[0]", S3, R3),
    case(
        "prod_over_a_small_dim",
        "column",
        "torch.prod(x, dim=1)",
        {"B": 5, "C": 6, "L": 97},
        "[torch.rand(B, C, L) + 0.5]",
    ),
    case("argmax_column", "column", "torch.argmax(x, dim=1)", S3, R3),
    case("argmin_row", "row", "torch.argmin(x, dim=2)", S3, R3),
    # ties everywhere: torch returns the first index, so must the kernel
    case("argmax_ties_column", "column", "torch.argmax(x, dim=1)", S3, "[torch.randint(0, 3, (B, C, L)).float()]"),
    case("argmin_ties_row", "row", "torch.argmin(x, dim=2)", S3, "[torch.randint(0, 3, (B, C, L)).float()]"),
    case("frobenius_norm_normalization", "row", "x / torch.norm(x, p='fro')", S3, R3),
]

SOFTMAX = [
    case("softmax_dim_1", "column", "torch.softmax(x, dim=1)", S3, R3),
    case("softmax_last_dim", "row", "torch.softmax(x, dim=-1)", S3, R3),
    case("log_softmax_dim_1", "column", "torch.log_softmax(x, dim=1)", S3, R3),
    case("log_softmax_last_dim", "row", "torch.log_softmax(x, dim=-1)", S3, R3),
]

NORMS = [
    case(
        "layer_norm",
        "row",
        "self.ln(x)",
        {"B": 5, "C": 7, "L": 53},
        R3,
        init="[(C, L)]",
        args="shape",
        init_body="self.ln = nn.LayerNorm(shape)\n" + AFFINE.format(m="self.ln"),
    ),
    case(
        "group_norm",
        "row",
        "self.gn(x)",
        {"B": 3, "C": 12, "H": 9, "W": 11},
        R4,
        init="[4, C]",
        args="g, c",
        init_body="self.gn = nn.GroupNorm(g, c)\n" + AFFINE.format(m="self.gn"),
    ),
    case(
        "instance_norm_2d",
        "row",
        "self.norm(x)",
        S4,
        "[torch.randn(B, C, H, W) * 3 + 1]",
        init="[C]",
        args="c",
        init_body="self.norm = nn.InstanceNorm2d(c)",
    ),
    case(
        "batch_norm_2d_eval",
        "row",
        "self.bn(x)",
        S4,
        R4,
        init="[C]",
        args="c",
        init_body="self.bn = nn.BatchNorm2d(c)\n"
        + AFFINE.format(m="self.bn")
        + "\n    self.bn.running_mean.normal_()\n    self.bn.running_var.uniform_(0.5, 2.0)",
    ),
    case(
        "rms_norm_written_out",
        "row",
        "x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)",
        {"B": 3, "C": 11, "H": 7, "W": 13},
        R4,
        init_body="self.eps = 1e-5",
    ),
]

POOLING = [
    case(
        "max_pool_2d_padding_dilation",
        "window",
        "self.pool(x)",
        {"B": 2, "C": 3, "H": 23, "W": 31},
        R4,
        init_body="self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=2)",
    ),
    case(
        "max_pool_1d",
        "window",
        "self.pool(x)",
        {"B": 2, "C": 5, "L": 101},
        R3,
        init_body="self.pool = nn.MaxPool1d(kernel_size=4, stride=3, padding=2)",
    ),
    case(
        "avg_pool_2d_padding_excluded",
        "window",
        "self.pool(x)",
        {"B": 2, "C": 3, "H": 23, "W": 31},
        R4,
        init_body="self.pool = nn.AvgPool2d(kernel_size=3, stride=2, padding=1, count_include_pad=False)",
    ),
    case(
        "avg_pool_1d",
        "window",
        "self.pool(x)",
        {"B": 2, "C": 5, "L": 101},
        R3,
        init_body="self.pool = nn.AvgPool1d(kernel_size=4, stride=3, padding=1)",
    ),
]

SCANS = [
    case("cumsum", "scan", "torch.cumsum(x, dim=1)", S2, R2),
    case("cumsum_middle_dim", "scan", "torch.cumsum(x, dim=1)", S3, R3),
    case("cumprod", "scan", "torch.cumprod(x, dim=1)", {"B": 37, "N": 41}, "[torch.rand(B, N) + 0.5]"),
    case("reverse_cumsum_via_flip", "scan", "torch.cumsum(x.flip(1), dim=1).flip(1)", S2, R2),
    case(
        "exclusive_cumsum_via_cat",
        "scan",
        "torch.cumsum(torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), x), dim=1), dim=1)[:, :-1]",
        S2,
        R2,
    ),
]

PARALLEL = [  # just over 32768 elements: the OpenMP loops
    case("parallel_softmax_rows", "row", "torch.softmax(x, dim=-1)", {"B": 37, "N": 1013}, R2),
    case("parallel_column_sum", "column", "torch.sum(x, dim=1)", {"B": 5, "C": 37, "L": 203}, R3),
    case("parallel_argmax_column", "column", "torch.argmax(x, dim=1)", {"B": 5, "C": 37, "L": 203}, R3),
    case("parallel_cumsum", "scan", "torch.cumsum(x, dim=2)", {"B": 5, "C": 37, "L": 203}, R3),
    case(
        "parallel_max_pool",
        "window",
        "self.pool(x)",
        {"B": 2, "C": 8, "H": 67, "W": 71},
        R4,
        init_body="self.pool = nn.MaxPool2d(kernel_size=3, stride=1, padding=1)",
    ),
    case("parallel_whole_tensor_normalization", "row", "x - x.mean()", {"B": 37, "N": 1013}, R2),
]

LOSSES = [
    case("mse", "row", "F.mse_loss(x, y)", S2, PAIR, signature="x, y"),
    case("mse_written_out", "row", "torch.mean((x - y) ** 2)", S2, PAIR, signature="x, y"),
    case(
        "cross_entropy_integer_targets",
        "row",
        "F.cross_entropy(x, t)",
        {"B": 37, "N": 19},
        "[torch.randn(B, N), torch.randint(0, N, (B,))]",
        signature="x, t",
    ),
    case("smooth_l1", "row", "F.smooth_l1_loss(x, y)", S2, PAIR, signature="x, y"),
    case(
        "kl_div_batchmean",
        "row",
        "F.kl_div(torch.log(x), y, reduction='batchmean')",
        S2,
        "[torch.randn(B, N).softmax(-1), torch.randn(B, N).softmax(-1)]",
        signature="x, y",
    ),
    case(
        "hinge",
        "row",
        "torch.clamp(1 - x * y, min=0).mean()",
        S2,
        "[torch.randn(B, N), torch.randint(0, 2, (B, N)).float() * 2 - 1]",
        signature="x, y",
    ),
    case("parallel_mse", "row", "F.mse_loss(x, y)", {"B": 37, "N": 1013}, PAIR, signature="x, y"),
]


# Tensors made inside forward: arange (and the masks tril and triu build from it), a one-element constant.
SQUARE = "[torch.randn(N, N), torch.randn(N, N)]"
MADE_IN_FORWARD = [
    case("lower_triangular_product", "gemm", "torch.tril(torch.matmul(A, B))", {"N": 67}, SQUARE, signature="A, B"),
    case("upper_triangular_product", "gemm", "torch.triu(A @ B, diagonal=1)", {"N": 67}, SQUARE, signature="A, B"),
    case("arange_with_start_and_step", "row", "x + torch.arange(3, 3 + 2 * N, 2)", S2, R2),
    case("a_tensor_made_of_a_number", "row", "x * torch.tensor(2.5) + torch.arange(N) * 0.5", S2, R2),
    case(
        "a_mask_s_complement_as_mamba_s_segment_sum_fills",  # ~mask on a bool tensor
        "row",
        "x.masked_fill(~torch.tril(torch.ones(N, N, dtype=bool)), -torch.inf).exp()",
        {"N": 13},
        "[torch.randn(N, N)]",
    ),
    case("bitwise_not_of_an_integer_tensor", "row", "~x", S2, "[torch.randint(-9, 9, (B, N))]"),
    case(
        "causal_attention",
        "gemm",
        "F.scaled_dot_product_attention(q, k, v, is_causal=True)",
        {"b": 2, "h": 3, "s": 37, "d": 24},
        "[torch.randn(b, h, s, d), torch.randn(b, h, s, d), torch.randn(b, h, s, d)]",
        signature="q, k, v",
    ),
]

# F.pad's constant mode: a crop where the padding is negative, the value either side where it is positive
PADS = [
    case("pad_last_dim", "row", "F.pad(x, (2, 3)) * 2", S2, R2),
    case("pad_and_crop_two_dims_with_a_value", "row", "F.pad(x, (1, -2, -3, 4), value=1.5) + 1", S2, R2),
    case("pad_then_reduce", "row", "F.pad(x, (0, 0, 2, 0)).sum(dim=1)", S2, R2),
    # Tensor.unfold (ViT's patches): a view, each window's element as a new last dim
    case("unfold_patches", "row", "x.unfold(2, 3, 3).unfold(3, 4, 4).sum(dim=-1) * 2", S4, R4),
    case("unfold_overlapping_windows", "row", "x.unfold(1, 5, 3) + 1", S2, R2),
    # indexing by a tensor: index_select, and x[idx] with one index tensor (Swin's relative position bias)
    case(
        "index_select",
        "row",
        "x.index_select(1, self.idx) * 2",
        S2,
        R2,
        init_body="self.register_buffer('idx', torch.tensor([3, 0, 5, 5, 1]))",
    ),
    case(
        "index_by_a_2d_tensor",
        "row",
        "x[:, self.idx] + 1",
        S2,
        R2,
        init_body="self.register_buffer('idx', torch.randint(0, 203, (2, 3)))",
    ),
]

# Recurrent layers (nn.LSTM, nn.GRU, nn.RNN) traced whole: the input's product, then one loop over time per
# layer and direction
RECURRENT = [
    case(
        "lstm_two_layers",
        "recurrence",
        "self.rnn(x)[0]",
        {},
        "[torch.randn(3, 7, 8)]",
        init_body="self.rnn = nn.LSTM(8, 16, 2, batch_first=True)",
    ),
    case(
        "lstm_bidirectional_cell_state",
        "recurrence",
        "self.rnn(x)[1][1]",
        {},
        "[torch.randn(7, 3, 8)]",
        init_body="self.rnn = nn.LSTM(8, 12, 1, bidirectional=True)",
    ),
    case("gru", "recurrence", "self.rnn(x)[0]", {}, "[torch.randn(5, 3, 8)]", init_body="self.rnn = nn.GRU(8, 16)"),
    case(
        "gru_three_bidirectional_layers_from_a_given_state_its_final_state",
        "recurrence",
        "self.rnn(x, h)[1] * 2",
        {},
        "[torch.randn(2, 6, 8), torch.randn(6, 2, 16)]",
        init_body="self.rnn = nn.GRU(8, 16, 3, batch_first=True, bidirectional=True)",
        signature="x, h",
    ),
    case(
        "lstm_from_a_given_state_without_biases",
        "recurrence",
        "torch.cat([self.rnn(x, (h, c))[0][-1], self.rnn(x, (h, c))[1][0][0]], 1)",
        {},
        "[torch.randn(9, 4, 8), torch.randn(1, 4, 16), torch.randn(1, 4, 16)]",
        init_body="self.rnn = nn.LSTM(8, 16, bias=False)",
        signature="x, h, c",
    ),
    case(
        "lstm_whose_initial_state_is_drawn_in_forward",
        "recurrence",
        "h = torch.randn(2, x.size(0), 16)\nc = torch.randn(2, x.size(0), 16)\nreturn self.rnn(x, (h, c))[0][:, -1]",
        {},
        "[torch.randn(3, 7, 8)]",
        init_body="self.rnn = nn.LSTM(8, 16, 2, batch_first=True)",
    ),
    case(  # a parallel step (batch x gates x hidden past PARALLEL_MIN); 40 units: a piece of the cell is short
        "lstm_parallel_steps_with_a_partial_piece_of_units",
        "recurrence",
        "self.rnn(x)[0]",
        {},
        "[torch.randn(8, 5, 8)]",
        init_body="self.rnn = nn.LSTM(8, 40, batch_first=True)",
    ),
    case(
        "gru_in_double",
        "recurrence",
        "self.rnn(x)[0]",
        {},
        "[torch.randn(5, 3, 8, dtype=torch.float64)]",
        init_body="self.rnn = nn.GRU(8, 16).double()",
    ),
    case(
        "rnn_tanh_two_layers",
        "recurrence",
        "self.rnn(x)[0]",
        {},
        "[torch.randn(6, 3, 8)]",
        init_body="self.rnn = nn.RNN(8, 16, 2)",
    ),
    case(
        "rnn_relu_bidirectional",
        "recurrence",
        "self.rnn(x)[0]",
        {},
        "[torch.randn(6, 3, 8)]",
        init_body="self.rnn = nn.RNN(8, 16, nonlinearity='relu', bidirectional=True)",
    ),
]


@pytest.mark.parametrize(
    ("kind", "spec"),
    [
        CHAIN,
        *ACTIVATIONS,
        *REDUCTIONS,
        *SOFTMAX,
        *NORMS,
        *POOLING,
        *SCANS,
        *PARALLEL,
        *MADE_IN_FORWARD,
        *PADS,
        *RECURRENT,
    ],
)
def test_the_generated_candidate_matches_the_reference_on_fresh_inputs(tmp_path, kind, spec):
    task = write_task(tmp_path, "task", **spec)
    generated = generate(task)
    assert kind in generated.kinds
    assert mismatch(task, generated.source) is None


@pytest.mark.parametrize(("kind", "spec"), LOSSES)
def test_a_loss_gives_the_reference_s_zero_dim_tensor(tmp_path, kind, spec):
    task = write_task(tmp_path, "task", **spec)
    generated = generate(task)
    namespace = run_candidate(generated.source)
    w = task.workloads[0]
    out = task.make_model(w, 0, namespace["ModelNew"])(*task.make_inputs(w, 3))
    assert out.shape == () and out.dtype == torch.float32
    assert mismatch(task, generated.source, namespace=namespace) is None


def test_argmax_and_argmin_give_int64_indices(tmp_path):
    task = write_task(tmp_path, "task", "return torch.argmax(x, dim=1), torch.argmin(x, dim=2)", S3, R3)
    source = generate(task).source
    namespace = run_candidate(source)
    w = task.workloads[0]
    first, second = task.make_model(w, 0, namespace["ModelNew"])(*task.make_inputs(w, 1))
    assert first.dtype == second.dtype == torch.int64
    assert mismatch(task, source, namespace=namespace) is None


def test_softmax_lowers_to_one_row_loop_nest(tmp_path):
    generated = generate(write_task(tmp_path, "task", "torch.softmax(x, dim=1)", S2, R2))
    assert (generated.fused, generated.kinds) == (1, ("row",))


def test_a_layer_norm_then_gelu_chain_lowers_to_one_row_loop_nest(tmp_path):
    task = write_task(
        tmp_path,
        "task",
        "F.gelu(self.ln(x)) * 1.5",
        S2,
        R2,
        init="[N]",
        args="n",
        init_body="self.ln = nn.LayerNorm(n)\n" + AFFINE.format(m="self.ln"),
    )
    generated = generate(task)
    assert (generated.fused, generated.kinds) == (1, ("row",))
    assert mismatch(task, generated.source) is None


# -- known bugs ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("forward", "sizes", "inputs"),
    [
        ("torch.softmax(x, dim=1)", {"B": 1, "N": 40009}, R2),
        ("x / torch.norm(x, p='fro')", {"N": 40009}, "[torch.randn(N)]"),
    ],
    ids=["softmax_of_one_long_row", "frobenius_normalization_of_a_long_vector"],
)
def test_a_whole_tensor_reduction_then_write_over_one_long_dim_builds(tmp_path, forward, sizes, inputs):
    task = write_task(tmp_path, "task", forward, sizes, inputs)
    assert mismatch(task, generate(task).source) is None


@pytest.mark.parametrize(
    "forward", ["torch.softmax(x, dim=1)", "x - x.mean(dim=1, keepdim=True)"], ids=["softmax", "subtract_the_mean"]
)
def test_a_reduction_over_a_size_one_dim_then_a_write_builds(tmp_path, forward):
    task = write_task(tmp_path, "task", forward, {"B": 37, "N": 1}, R2)
    assert mismatch(task, generate(task).source) is None


@pytest.mark.parametrize("forward", ["torch.max(x, dim=0).values", "torch.min(x, 0)[0]"], ids=["max", "min"])
def test_max_or_min_values_over_dim_0_keep_the_other_dims(tmp_path, forward):
    task = write_task(tmp_path, "task", forward, S3, R3)
    assert mismatch(task, generate(task).source) is None


@pytest.mark.parametrize(
    ("forward", "inputs"),
    [
        ("torch.argmax(x, dim=0)", R3),
        ("torch.argmin(x, 0)", R3),
        ("torch.prod(x, dim=0)", "[torch.rand(B, C, L) + 0.5]"),
    ],
    ids=["argmax", "argmin", "prod"],
)
def test_argmax_argmin_and_prod_over_dim_0_lower(tmp_path, forward, inputs):
    task = write_task(tmp_path, "task", forward, S3, inputs)
    assert mismatch(task, generate(task).source) is None


def test_an_integer_tensor_compared_with_a_fraction_compares_as_float(tmp_path):
    task = write_task(tmp_path, "task", "torch.where(x > 0.5, x * 2, x - 1)", S2, "[torch.randint(-2, 3, (B, N))]")
    assert mismatch(task, generate(task).source) is None


@pytest.mark.parametrize("tile", [64, 256, 4096])
@pytest.mark.parametrize(
    "forward", ["torch.sum(x, dim=1)", "torch.mean(x, dim=1)", "torch.prod(x, dim=1)", "torch.max(x, dim=1).values"]
)
@pytest.mark.parametrize(
    ("columns", "chunked"),
    [
        # 48 columns: at most 16 vectors on any CPU, so the whole row is one chunk and the reads stream in order
        (48, ("#if TILE >= 48", "cb += 48")),
        # 1088 columns: wider than 16 vectors on any CPU: 17 chunks of 64 floats, in blocks of 64, 256 or 4096
        (1088, ("#if TILE % 64 == 0", "cb += 64")),
    ],
)
def test_a_column_reduction_over_whole_chunks_keeps_them_in_registers_and_matches_at_every_tile(
    tmp_path, forward, tile, columns, chunked
):
    task = write_task(tmp_path, "task", forward, {"B": 3, "C": 11, "L": columns}, R3)
    source = generate(task).source
    assert all(line in source for line in chunked), "the chunked path is generated"
    assert source.count("\nTILE = 256\n") == 1
    assert mismatch(task, source.replace("\nTILE = 256\n", f"\nTILE = {tile}\n")) is None


def _recurrence(tmp_path, steps: int):
    """h_t = tanh(h_{t-1} @ W + c_{t-1}), c_t = 0.5 c_{t-1} + h_t: the cell state an elementwise chain."""
    body = f"h, c = x, x\nfor _ in range({steps}):\n    h = torch.tanh(h @ self.w + c)\n    c = c * 0.5 + h\nreturn c"
    return write_task(
        tmp_path,
        f"rnn{steps}",
        body,
        {},
        "[torch.randn(16, 32) * 0.1]",
        init_body="self.w = nn.Parameter(torch.randn(32, 32) * 0.1)",
    )


def test_a_deep_elementwise_recurrence_is_stored_so_the_code_grows_linearly_with_its_length(tmp_path):
    short, long = _recurrence(tmp_path, 40), _recurrence(tmp_path, 80)
    a, b = generate(short), generate(long)
    assert mismatch(long, b.source) is None
    assert len(b.source) < 2.5 * len(a.source)  # inlined in every step's product it grew with the square


@pytest.mark.parametrize(
    ("forward", "walked"),
    [
        ("self.bn(x)", "(i1)*49 + (iq)"),  # the channel fixed per row, each image's 7x7 walked as one
        ("torch.relu(x) * 2", "out0[(iq)]"),  # everything one walk
        ("x + x[:, :, :1, :]", "(i2)*7 + (i3)"),  # a read broadcast over rows divides the walk: rows of 7
    ],
)
def test_an_elementwise_kernel_walks_as_many_trailing_dims_as_one_as_its_reads_allow(tmp_path, forward, walked):
    task = write_task(
        tmp_path,
        "task",
        forward,
        {"B": 3},
        "[torch.randn(B, 16, 7, 7)]",
        init_body="self.bn = nn.BatchNorm2d(16)",
    )
    source = generate(task).source
    assert walked in source
    assert mismatch(task, source) is None


@pytest.mark.parametrize("forward", ["torch.cumsum(x, dim=2)", "torch.cumprod(x, dim=2)", "torch.cumsum(x.flip(2), 2)"])
def test_a_scan_advances_eight_rows_together_and_finishes_the_rest_one_by_one(tmp_path, forward):
    # 3 x 5 = 15 rows over two outer dims: one group of 8 rows, then 7 alone
    task = write_task(tmp_path, "task", forward, {"B": 3, "C": 5, "L": 301}, R3)
    source = generate(task).source
    assert "double acc[8];" in source
    assert mismatch(task, source) is None


@pytest.mark.parametrize("forward", ["torch.argmax(x, dim=1)", "torch.argmin(x, dim=1)"])
@pytest.mark.parametrize("inputs", [R3, "[torch.randint(0, 3, (B, C, L)).float()]"])  # the second: many ties
def test_an_arg_reduction_over_a_narrow_kept_row_keeps_values_and_positions_in_registers(tmp_path, forward, inputs):
    task = write_task(tmp_path, "task", forward, {"B": 3, "C": 37, "L": 48}, inputs)
    source = generate(task).source
    assert "int32_t pos[48];" in source
    assert mismatch(task, source) is None


def _gru(tmp_path, steps: int):
    return write_task(
        tmp_path,
        f"gru{steps}",
        "self.rnn(x, h)[0]",
        {},
        f"[torch.rand({steps}, 2, 8), torch.rand(2, 2, 16)]",
        init_body="self.rnn = nn.GRU(8, 16, 2)",
        signature="x, h",
    )


def test_a_recurrent_layer_s_source_is_the_same_size_for_any_sequence_length(tmp_path):
    short, long = generate(_gru(tmp_path, 50)), generate(_gru(tmp_path, 1000))
    assert mismatch(_gru(tmp_path, 1000), long.source) is None
    assert len(long.source) < 1.05 * len(short.source)  # written out step by step it grew 20-fold


def _stateful(tmp_path, forward: str):
    """VanillaRNN's form: a plain tensor attribute made in __init__, written in forward."""
    return write_task(
        tmp_path,
        "stateful",
        forward,
        {},
        "[torch.randn(4, 8), torch.randn(4, 8)]",
        init_body="self.hidden = torch.randn(4, 8)\nself.i2h = nn.Linear(16, 8)",
        signature="x, h",
    )


def test_a_tensor_attribute_overwritten_in_forward_before_it_is_read_is_not_passed(tmp_path):
    task = _stateful(
        tmp_path,
        "self.hidden.copy_(h)\nself.hidden = torch.tanh(self.i2h(torch.cat((x, self.hidden), 1)))\nreturn self.hidden",
    )
    assert mismatch(task, generate(task).source) is None


def test_a_tensor_attribute_read_in_forward_is_refused_naming_register_buffer(tmp_path):
    task = _stateful(tmp_path, "return torch.tanh(self.i2h(torch.cat((x, self.hidden), 1)))")
    with pytest.raises(Unsupported, match="register it with register_buffer"):
        generate(task)
