"""Handlers for ATen's products: mm, bmm, addmm, baddbmm, and 2-d (and 1-d) convolution.

A float32 product big enough to pay for packing is a ``Matmul`` (the GEMM kernel);
any other (small, skinny in M or N, float64, integer) is a sum over K of elementwise
products, which the row or column kernels compute in one pass. A convolution reads
its input through ``Patches`` (never stored: padding is a bounds test where it is read).
``conv_mode`` chooses its form, the CONV knob's two options: ``gemm`` is the weight's
product with the patches as an im2col matrix, packed where it is read (implicit GEMM);
``direct`` sums over (C, KH, KW) per output element in nested loops.
"""

from __future__ import annotations

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
    stride, padding, dilation, transposed, _, groups = args[3:9]
    if transposed:
        raise Unsupported("transposed convolution (aten.convolution with transposed=True)")
    if len(x.shape) == 3:  # 1-d: a 2-d convolution of height 1
        x = V.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
        w = V.reshape(w, (w.shape[0], w.shape[1], 1, w.shape[2]))
        stride, padding, dilation = (1, *stride), (0, *padding), (1, *dilation)
        out = _conv2d(x, w, tuple(stride), tuple(padding), tuple(dilation), groups)
        out = V.reshape(out, (out.shape[0], out.shape[1], out.shape[3]))
    elif len(x.shape) == 4:
        out = _conv2d(x, w, tuple(stride), tuple(padding), tuple(dilation), groups)
    else:
        raise Unsupported(f"{len(x.shape) - 2}-d convolution (the lowering has 1-d and 2-d)")
    if bias is not None:
        b = node(bias)
        out = pointwise("add", [out, V.reshape(b, (b.shape[0],) + (1,) * (len(out.shape) - 2))], out.ctype)
    return out


def _conv2d(
    x: Node, w: Node, stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int], groups: int
) -> Node:
    n, c, h, wd = x.shape
    co, cg, kh, kw = w.shape
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    og = co // groups
    patches = Patches((n, c, kh, kw, oh, ow), x.ctype, base=x, stride=stride, padding=padding, dilation=dilation)
    if conv_mode.get() == "direct":
        taps = V.permute(V.reshape(patches, (n, groups, 1, cg, kh, kw, oh, ow)), [0, 1, 2, 6, 7, 3, 4, 5])
        big = (n, groups, og, oh, ow, cg, kh, kw)
        weights = V.reshape(w, (1, groups, og, 1, 1, cg, kh, kw))
        terms = pointwise("mul", [V.broadcast(weights, big), V.broadcast(taps, big)], promote(x.ctype, w.ctype))
        return V.reshape(reduce("sum", terms, [5, 6, 7], False), (n, co, oh, ow))
    b = V.reshape(patches, (n, groups, cg * kh * kw, oh * ow))
    a = V.broadcast(V.reshape(w, (1, groups, og, cg * kh * kw)), (n, groups, og, cg * kh * kw))
    return V.reshape(matmul(a, b), (n, co, oh, ow))
