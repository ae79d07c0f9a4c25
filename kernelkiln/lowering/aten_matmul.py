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

import math
from contextvars import ContextVar
from typing import Any

from kernelkiln.lowering import views as V
from kernelkiln.lowering.aten import handles, node, pointwise, reduce
from kernelkiln.lowering.gemm import GEMM_MIN
from kernelkiln.lowering.graph import Matmul, Node, Patches, Unsupported, promote

conv_mode: ContextVar[str] = ContextVar("conv_mode", default="gemm")


def matmul(a: Node, b: Node, direct: bool = False) -> Node:
    """``a`` (..., M, K) @ ``b`` (..., K, N), the leading dims equal."""
    *batch, m, k = a.shape
    n = b.shape[-1]
    if tuple(b.shape[:-2]) != tuple(batch) or b.shape[-2] != k:
        raise Unsupported(f"a product of shapes {a.shape} and {b.shape}")
    if not direct and a.ctype == b.ctype == "float" and m >= 4 and n >= 8 and m * n * k >= GEMM_MIN:
        return Matmul((*batch, m, n), "float", a=a, b=b)
    ctype = promote(a.ctype, b.ctype)
    if n >= 8 and m < 4:  # few rows, many columns: reduce over K with N innermost (a column kernel)
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
    if transposed:
        w, stride, padding, upsample, sizes = _as_forward(x, w, stride, padding, dilation, output_padding, groups)
    else:
        upsample = (1,) * len(stride)
        sizes = tuple(
            (e + 2 * p - d * (k - 1) - 1) // s + 1
            for e, p, d, k, s in zip(x.shape[2:], padding, dilation, w.shape[2:], stride, strict=True)
        )
    if len(x.shape) == 3:  # 1-d: a 2-d convolution of height 1
        x = V.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
        w = V.reshape(w, (w.shape[0], w.shape[1], 1, w.shape[2]))
        stride, padding, dilation, upsample = (1, *stride), (0, *padding), (1, *dilation), (1, *upsample)
        out = _conv(x, w, stride, padding, dilation, upsample, groups, (1, *sizes))
        out = V.reshape(out, (out.shape[0], out.shape[1], out.shape[3]))
    else:
        out = _conv(x, w, stride, padding, dilation, upsample, groups, sizes)
    if bias is not None:
        b = node(bias)
        out = pointwise("add", [out, V.reshape(b, (b.shape[0],) + (1,) * (len(out.shape) - 2))], out.ctype)
    return out


def _as_forward(
    x: Node, w: Node, stride: tuple, padding: tuple, dilation: tuple, output_padding: tuple, groups: int
) -> tuple[Node, tuple, tuple, tuple, tuple]:
    """A transposed convolution as the forward one it is: over its input spread ``stride`` apart (zeros
    between, ``Patches.upsample``), stride 1, padding ``dilation * (k - 1) - padding`` before (and
    ``output_padding`` more after, which the output size carries), the weight's channels swapped per group
    and its taps flipped."""
    cin, og, *kernel = w.shape
    r, cg = len(kernel), cin // groups
    grouped = V.reshape(w, (groups, cg, og, *kernel))
    swapped = V.permute(grouped, [0, 2, 1, *range(3, 3 + r)])
    w = V.reshape(V.flip(swapped, list(range(3, 3 + r))), (groups * og, cg, *kernel))
    low = tuple(d * (k - 1) - p for d, k, p in zip(dilation, kernel, padding, strict=True))
    sizes = [
        (e - 1) * s - 2 * p + d * (k - 1) + op + 1
        for e, s, p, d, k, op in zip(x.shape[2:], stride, padding, dilation, kernel, output_padding, strict=True)
    ]
    if any(size < 1 for size in sizes):
        raise Unsupported(f"a transposed convolution with output size {sizes}")
    return w, (1,) * r, low, stride, tuple(sizes)


def _conv(
    x: Node,
    w: Node,
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    upsample: tuple[int, ...],
    groups: int,
    out: tuple[int, ...],
) -> Node:
    n, c = x.shape[:2]
    co, cg, *kernel = w.shape
    r = len(kernel)
    og = co // groups
    patches = Patches(
        (n, c, *kernel, *out), x.ctype, base=x, stride=stride, padding=padding, dilation=dilation, upsample=upsample
    )
    if conv_mode.get() == "direct":
        # (n, g, 1, cg, *k, *o) -> (n, g, 1, *o, cg, *k)
        grouped = V.reshape(patches, (n, groups, 1, cg, *kernel, *out))
        taps = V.permute(grouped, [0, 1, 2, *range(4 + r, 4 + 2 * r), 3, *range(4, 4 + r)])
        big = (n, groups, og, *out, cg, *kernel)
        weights = V.reshape(w, (1, groups, og, *(1,) * r, cg, *kernel))
        terms = pointwise("mul", [V.broadcast(weights, big), V.broadcast(taps, big)], promote(x.ctype, w.ctype))
        summed = reduce("sum", terms, list(range(3 + r, 4 + 2 * r)), False)
        return V.reshape(summed, (n, co, *out))
    b = V.reshape(patches, (n, groups, cg * math.prod(kernel), math.prod(out)))
    a = V.broadcast(V.reshape(w, (1, groups, og, cg * math.prod(kernel))), (n, groups, og, cg * math.prod(kernel)))
    return V.reshape(matmul(a, b), (n, co, *out))
