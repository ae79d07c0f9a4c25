"""A depthwise convolution (one input and one output channel per group): ``Window(op="dot")``.

As a product it has one row per group, too few for the GEMM kernel, and as a reduction over its taps
every output element tests each tap's bounds and divides its position back into (row, column). Here
each output row is accumulated in place: for every tap whose input row exists, the range of output
columns whose input column exists is worked out once, and the columns in it are one branch-free loop
(``KILN_LOOP``) of a multiply-add by that tap's weight, which vectorizes along the row.
"""

from __future__ import annotations

import math

from kernelkiln.lowering.body import Body
from kernelkiln.lowering.graph import Window
from kernelkiln.lowering.loops import LOOP, Writer, decompose, parallel


def depthwise(w: Writer, buffers: dict[int, str], p: Window) -> None:
    """``p``'s loop nest: a parallel loop over (image, channel, leading output dims), one output row each."""
    assert p.weight is not None
    out, src = p.shape, p.arg.shape
    rank = len(p.kernel)
    last = len(out) - 1
    rows, width = math.prod(out[:last]), out[last]
    pragma = parallel(math.prod(out) * math.prod(p.kernel))
    if pragma:
        w(pragma)
    w.open(f"for (int64_t o = 0; o < {rows}; ++o)")
    decompose(w, out, list(range(last)), "o")
    at = [f"i{d}" if out[d] != 1 else "0" for d in range(last)]
    w(f"float* restrict dst = {buffers[id(p)]} + o * {width};")
    w(f"for (int64_t j = 0; j < {width}; ++j) dst[j] = 0.0f;")
    # the taps over every spatial dim but the last: skipped where their input row does not exist
    for j in range(rank - 1):
        d = 2 + j
        w.open(f"for (int64_t k{j} = 0; k{j} < {p.kernel[j]}; ++k{j})")
        w(f"const int64_t x{j} = {at[d]} * {p.stride[j]} - {p.padding[j]} + k{j} * {p.dilation[j]};")
        w(f"if (x{j} < 0 || x{j} >= {src[d]}) continue;")
    j = rank - 1
    size, s, pad, dil = src[last], p.stride[j], p.padding[j], p.dilation[j]
    w.open(f"for (int64_t k{j} = 0; k{j} < {p.kernel[j]}; ++k{j})")
    body = Body(buffers)
    taps = tuple(f"k{t}" for t in range(rank))
    weight = body.value(p.weight, (at[1], *taps))
    w.body(body)
    w(f"const float wk = {weight};")
    # the output columns c whose input column c*s - off exists: [ceil(off / s), floor((size - 1 + off) / s)]
    w(f"const int64_t off = {pad} - k{j} * {dil};")
    w(f"const int64_t lo = off <= 0 ? 0 : (off + {s - 1}) / {s};")
    w(f"const int64_t top = {size - 1} + off;")
    w(f"const int64_t hi = top < 0 ? 0 : KILN_MIN(top / {s} + 1, (int64_t){width});")
    w.pragma(LOOP)
    w.open("for (int64_t c = lo; c < hi; ++c)")
    inner = Body(buffers)
    column = "c" if s == 1 else f"c * {s}"
    value = inner.value(p.arg, (at[0], at[1], *(f"x{t}" for t in range(rank - 1)), f"{column} - off"))
    w.body(inner)
    w(f"dst[c] += wk * {value};")
    w.close()
    w.close()
    for _ in range(rank - 1):
        w.close()
    w.close()
