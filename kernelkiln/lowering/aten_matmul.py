"""Handlers for ATen's products: mm, bmm, addmm, baddbmm, and 1-, 2- and 3-d convolution, transposed or not.

A float32 product big enough to pay for packing is a ``Matmul`` (the GEMM kernel);
any other (small, skinny in M or N, float64, integer) is a sum over K of elementwise
products, which the row or column kernels compute in one pass. A convolution reads
its input through ``Patches`` (never stored: padding is a bounds test where it is read).
``conv_mode`` chooses its form, the CONV knob's two options: ``gemm`` is the weight's
product with the patches as an im2col matrix, packed where it is read (implicit GEMM);
``direct`` sums over (C, KH, KW) per output element in nested loops.
"""

from __future__ import annotations

import itertools
import math
from contextvars import ContextVar
from typing import Any, NamedTuple, cast

from kernelkiln.lowering import views as V
from kernelkiln.lowering.aten import handles, node, pointwise, reduce
from kernelkiln.lowering.gemm import GEMM_MIN
from kernelkiln.lowering.graph import (
    Concat,
    Constant,
    Index,
    Input,
    Matmul,
    Node,
    Patches,
    Pointwise,
    Unsupported,
    View,
    Window,
    promote,
)

conv_mode: ContextVar[str] = ContextVar("conv_mode", default="gemm")


def matmul(a: Node, b: Node, direct: bool = False) -> Node:
    """``a`` (..., M, K) @ ``b`` (..., K, N), the leading dims equal."""
    *batch, m, k = a.shape
    n = b.shape[-1]
    if tuple(b.shape[:-2]) != tuple(batch) or b.shape[-2] != k:
        raise Unsupported(f"a product of shapes {a.shape} and {b.shape}")
    if not direct and _gemm(a, b):
        return Matmul((*batch, m, n), "float", a=a, b=b)
    ctype = promote(a.ctype, b.ctype)
    if n >= 8 and (m < 4 or k < SHORT_K) and not _stored_along_k(b):
        # few rows or a short K, many columns: N innermost (a column kernel), each lane an output
        big = (*batch, m, k, n)
        terms = pointwise(
            "mul",
            [V.broadcast(V.reshape(a, (*batch, m, k, 1)), big), V.broadcast(V.reshape(b, (*batch, 1, k, n)), big)],
            ctype,
        )
        return reduce("sum", terms, [len(big) - 2], False)
    big = (*batch, m, n, k)  # K innermost: a row kernel per output element
    terms = pointwise(
        "mul",
        [
            V.broadcast(V.reshape(a, (*batch, m, 1, k)), big),
            V.broadcast(V.reshape(V.transpose(b, -1, -2), (*batch, 1, n, k)), big),
        ],
        ctype,
    )
    return reduce("sum", terms, [len(big) - 1], False)


# a K below which a product too small for the GEMM kernel runs with N innermost even over many rows: K
# innermost, each output's dot is a few lanes and a horizontal sum (a ConvTranspose3d's phases with 4
# channels and K of 3 to 24 ran 2.5x faster as column kernels)
SHORT_K = 32


def _gemm(a: Node, b: Node) -> bool:
    """Whether ``a @ b`` is a GEMM kernel: float32, and enough rows, columns and work to pay for packing."""
    m, k, n = *a.shape[-2:], b.shape[-1]
    return a.ctype == b.ctype == "float" and m >= 4 and n >= 8 and m * n * k >= GEMM_MIN


def _stored_along_k(b: Node) -> bool:
    """Whether ``b`` (..., K, N) is a parameter or input (..., N, K) read transposed: a Linear's weight, K
    contiguous. A column kernel would read it with N innermost, a whole row of it apart per lane: at a
    power-of-two K those rows share cache sets, and AlexNet's 4096x4096 layer ran 50x slower than its
    9216x4096 one; a row kernel per output reads each row in order."""
    at: Index = (*(f"b{d}" for d in range(len(b.shape) - 2)), "kk", "nn")
    base = b
    while isinstance(base, View):
        at, base = tuple(base.where(at)), base.base
    return isinstance(base, Input) and len(at) >= 2 and tuple(at[-2:]) == ("nn", "kk")


def _scaled_add(acc: Any, product: Node, beta: Any, alpha: Any) -> Node:
    ctype = product.ctype
    if alpha != 1:
        product = pointwise("mul", [product, alpha], ctype)
    if beta == 0:
        return product
    term = node(acc) if beta == 1 else pointwise("mul", [acc, beta], ctype)
    return pointwise("add", [product, term], ctype)


@handles("mm", "bmm")
def _mm(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    return matmul(node(args[0]), node(args[1]))


@handles("addmm", "baddbmm")
def _addmm(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    return _scaled_add(args[0], matmul(node(args[1]), node(args[2])), beta, alpha)


@handles("convolution")
def _convolution(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    x, w = node(args[0]), node(args[1])
    bias = args[2]
    stride, padding, dilation, output_padding = (tuple(int(v) for v in a) for a in (*args[3:6], args[7]))
    transposed, groups = bool(args[6]), int(args[8])
    if len(x.shape) not in (3, 4, 5):
        raise Unsupported(f"{len(x.shape) - 2}-d convolution (the lowering has 1-, 2- and 3-d)")
    one_d = len(x.shape) == 3
    if one_d:  # a 2-d convolution of height 1
        x = V.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
        w = V.reshape(w, (w.shape[0], w.shape[1], 1, w.shape[2]))
        stride, padding, dilation = (1, *stride), (0, *padding), (1, *dilation)
        output_padding = (0, *output_padding)
    if transposed:
        out = _transposed(x, w, stride, padding, dilation, output_padding, groups)
    else:
        sizes = tuple(
            (e + 2 * p - d * (k - 1) - 1) // s + 1
            for e, p, d, k, s in zip(x.shape[2:], padding, dilation, w.shape[2:], stride, strict=True)
        )
        out = _conv(x, w, stride, padding, dilation, groups, sizes)
    if one_d:
        out = V.reshape(out, (out.shape[0], out.shape[1], out.shape[3]))
    if bias is not None:
        b = node(bias)
        out = pointwise("add", [out, V.reshape(b, (b.shape[0],) + (1,) * (len(out.shape) - 2))], out.ctype)
    return out


def _transposed(
    x: Node, w: Node, stride: tuple, padding: tuple, dilation: tuple, output_padding: tuple, groups: int
) -> Node:
    """A transposed convolution as forward ones over its input: one per output phase.

    Output position ``o = s * q + res`` gathers the input at ``i = (o + padding - k * dilation) / s`` for
    the taps k that make it whole; per dim and residue those taps are every ``s / gcd(s, d)``-th, and i
    steps by ``d / gcd(s, d)`` between them. So each combination of residues (a phase) is a stride-1
    forward convolution of the input, with those taps flipped, and the phases interleave into the output.
    Read as one convolution over the input spread ``s`` apart (zeros between), all but one in
    ``s**r`` of its multiply-adds would be by zero: a stride-2 3-d one did 8 times the work (0.06-0.2x eager).
    """
    _, og, *kernel = w.shape
    r = len(kernel)
    sizes = [
        (e - 1) * s - 2 * p + d * (k - 1) + op + 1
        for e, s, p, d, k, op in zip(x.shape[2:], stride, padding, dilation, kernel, output_padding, strict=True)
    ]
    if any(size < 1 for size in sizes):
        raise Unsupported(f"a transposed convolution with output size {sizes}")
    n, co = x.shape[0], groups * og
    per_dim = [
        [_phase_taps(res, s, p, d, k) for res in range(s)]
        for s, p, d, k in zip(stride, padding, dilation, kernel, strict=True)
    ]
    counts = tuple(-(-size // s) for size, s in zip(sizes, stride, strict=True))  # phase 0's, the most
    parts: list[Node] = []
    for phase in itertools.product(*(range(s) for s in stride)):
        taps = [per_dim[dim][res] for dim, res in enumerate(phase)]
        if any(t is None for t in taps):  # no tap reaches these positions: only the bias does
            parts.append(Constant((n, co, *counts), promote(x.ctype, w.ctype), value=0))
            continue
        spans = cast(list[PhaseTaps], taps)
        wp = w
        for dim, t in enumerate(spans):
            wp = V.slice_(wp, 2 + dim, t.first, t.first + (t.taps - 1) * t.step + 1, t.step)
        pads, dils = tuple(t.padding for t in spans), tuple(t.dilation for t in spans)
        parts.append(_conv(x, _forward_weight(wp, groups), (1,) * r, pads, dils, groups, counts))
    if len(parts) == 1:
        return parts[0]
    stacked = Concat(
        (len(parts), n, co, *counts), parts[0].ctype, parts=tuple(V.reshape(p, (1, *p.shape)) for p in parts), dim=0
    )
    spread = V.reshape(stacked, (*stride, n, co, *counts))
    order = [r, r + 1, *(i for dim in range(r) for i in (r + 2 + dim, dim))]
    joined = V.reshape(V.permute(spread, order), (n, co, *(c * s for c, s in zip(counts, stride, strict=True))))
    for dim, size in enumerate(sizes):
        joined = V.slice_(joined, 2 + dim, 0, size)
    return joined


class PhaseTaps(NamedTuple):
    """The taps that reach one dim's output positions of one residue, and the forward convolution they make."""

    first: int  # the first tap
    taps: int  # how many
    step: int  # between taps
    padding: int  # the forward convolution's, over the original input
    dilation: int


def _phase_taps(res: int, s: int, p: int, d: int, k: int) -> PhaseTaps | None:
    """The taps that reach output positions ``res`` mod ``s`` of one dim, or None when none does."""
    taps = [t for t in range(k) if (res + p - t * d) % s == 0]
    if not taps:
        return None
    return PhaseTaps(taps[0], len(taps), s // math.gcd(s, d), -((res + p - taps[-1] * d) // s), d // math.gcd(s, d))


def _forward_weight(w: Node, groups: int) -> Node:
    """A transposed convolution's weight (C_in, C_out / groups, *K) as a forward one's, (C_out, C_in / groups,
    *K): its channels swapped per group and its taps flipped."""
    cin, og, *kernel = w.shape
    r, cg = len(kernel), cin // groups
    grouped = V.reshape(w, (groups, cg, og, *kernel))
    swapped = V.permute(grouped, [0, 2, 1, *range(3, 3 + r)])
    return V.reshape(V.flip(swapped, list(range(3, 3 + r))), (groups * og, cg, *kernel))


def _conv(
    x: Node,
    w: Node,
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    groups: int,
    out: tuple[int, ...],
) -> Node:
    w, padding = _reached_taps(x, w, stride, padding, dilation, out)
    n, c = x.shape[:2]
    co, cg, *kernel = w.shape
    r = len(kernel)
    og = co // groups
    if conv_mode.get() != "direct" and cg == 1 and og == 1 and x.ctype == w.ctype == "float":
        # depthwise: a product of one row per group; as a window per channel its output row is one vector loop
        weight = V.reshape(w, (co, *kernel))
        return Window(
            (n, co, *out),
            "float",
            op="dot",
            arg=x,
            weight=weight,
            kernel=tuple(kernel),
            stride=stride,
            padding=padding,
            dilation=dilation,
        )
    patches = Patches((n, c, *kernel, *out), x.ctype, base=x, stride=stride, padding=padding, dilation=dilation)
    if conv_mode.get() == "direct":
        # (n, g, 1, cg, *k, *o) -> (n, g, 1, *o, cg, *k)
        grouped = V.reshape(patches, (n, groups, 1, cg, *kernel, *out))
        taps = V.permute(grouped, [0, 1, 2, *range(4 + r, 4 + 2 * r), 3, *range(4, 4 + r)])
        big = (n, groups, og, *out, cg, *kernel)
        weights = V.reshape(w, (1, groups, og, *(1,) * r, cg, *kernel))
        terms = pointwise("mul", [V.broadcast(weights, big), V.broadcast(taps, big)], promote(x.ctype, w.ctype))
        summed = reduce("sum", terms, list(range(3 + r, 4 + 2 * r)), False)
        return V.reshape(summed, (n, co, *out))
    k, positions = cg * math.prod(kernel), math.prod(out)
    b = V.reshape(patches, (n, groups, k, positions))
    if n > 1 and positions < FOLD_POSITIONS and n * positions >= FOLD_COLUMNS:
        folded = _batch_folded(w, b, groups, og)
        if folded is not None:
            return V.reshape(folded, (n, co, *out))
    a = V.broadcast(V.reshape(w, (1, groups, og, k)), (n, groups, og, k))
    if og > 1 and positions < 8:
        # under 8 output positions, too few columns for the GEMM kernel: each output element is a dot over K,
        # which would read the patches a position apart with a bounds test per tap; their rows stored once
        # (an im2col), each dot reads one in order. With more positions and a short K (a small product) the
        # copy only added a pass: a ConvTranspose3d's phases with 4 channels ran slower so
        rows = V.transpose(b, -1, -2)
        b = V.transpose(Pointwise(rows.shape, rows.ctype, op="store", args=(rows,)), -1, -2)
    return V.reshape(matmul(a, b), (n, co, *out))


# output positions per image below which a convolution's images are one product's columns: a 3x3 convolution
# of 512 channels over 4 images of 4x4 ran 8.9x faster folded, of 256 over 4 of 7x7 1.6x, of 128 over 8 of 5x5
# 1.9x; of 256 over 2 of 14x14 the blocked form per image was 1.3x faster than folded (one thread)
FOLD_POSITIONS = 64
# and when the images give it at least this many columns: DenseNet-201's 2x2 stage over 2 images, 8 columns,
# ran 1.8x slower as one product than as a dot per output over its stored patch rows
FOLD_COLUMNS = 32


def _batch_folded(w: Node, b: Node, groups: int, og: int) -> Node | None:
    """The convolution as one product per group over every image's positions (N = images x positions), as
    (n, groups, og, positions); None where that is still too small for the GEMM kernel. Per image, a 5x5
    output is 25 columns, under one register tile's width of some CPUs and a poor fit for the rest."""
    n, _, k, positions = b.shape
    columns = V.reshape(V.permute(b, [1, 2, 0, 3]), (groups, k, n * positions))
    weights = V.reshape(w, (groups, og, k))
    if not _gemm(weights, columns):
        return None
    product = V.reshape(matmul(weights, columns), (groups, og, n, positions))
    return V.permute(product, [2, 0, 1, 3])


def _reached_taps(
    x: Node, w: Node, stride: tuple[int, ...], padding: tuple[int, ...], dilation: tuple[int, ...], out: tuple
) -> tuple[Node, tuple[int, ...]]:
    """``w`` cut to the taps some output position reads inside ``x``, and the padding that keeps each position's
    reads: a 3x3 convolution padded by 1 over a 1x1 input (ResNet's last stage on small images) reads only its
    centre tap, and is a 1x1 convolution."""
    dims = zip(x.shape[2:], padding, stride, dilation, w.shape[2:], out, strict=True)
    for dim, (e, p, s, d, k, o) in enumerate(dims):
        reached = [j for j in range(k) if any(0 <= q * s - p + j * d < e for q in range(o))]
        if reached and (reached[0], reached[-1]) != (0, k - 1):
            w = V.slice_(w, 2 + dim, reached[0], reached[-1] + 1)
            padding = (*padding[:dim], p - reached[0] * d, *padding[dim + 1 :])
    return w, padding
