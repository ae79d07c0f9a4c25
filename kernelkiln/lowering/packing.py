"""Packing a GEMM's operands into slivers: B's NR wide, A's MR tall, each read through the graph where it is
stored, along its contiguous dim; a convolution's patches from tap and position tables (implicit im2col)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from kernelkiln.lowering.body import Body, invariant
from kernelkiln.lowering.graph import Matmul, Node, Patches, Pointwise, View, constant, linear
from kernelkiln.lowering.loops import SIMD, Writer


def pack(
    w: Writer,
    buffers: dict[int, str],
    names: Iterator[int],
    node: Node,
    idx: tuple[str, ...],
    sliver: str,
    count: str,
    width: str,
    position: str,
    inside: str,
    target: str,
) -> None:
    """Pack ``node`` at ``idx`` into slivers ``width`` wide; 0 past the edge (``inside`` false)."""
    patches = _patches_at(node, idx) if width == "NR" else None
    if patches is not None:
        _pack_patches(w, buffers, names, *patches)
        return
    along_p = _contiguous(node, idx) == idx[-1 if width == "MR" else -2]
    w("#pragma omp for schedule(static)")
    w.open(f"for (int64_t {sliver} = 0; {sliver} < {count}; ++{sliver})")
    rows, ps = f"for (int r = 0; r < {width}; ++r)", "for (int64_t p = 0; p < kc; ++p)"
    body = Body(buffers, names=names)
    if along_p:
        # the edge test depends on r alone: taken once per r, it leaves p's loop without a branch, which
        # GCC vectorizes whatever the value costs (with exp inlined, the guarded loop stayed scalar)
        w.open(rows)
        w(f"const int64_t {position};")
        w.open(f"if ({inside})")
        w.open(ps)
        value = body.value(node, idx)
        w.body(body)
        w(f"{target} = (float){value};")
        w.close()
        w.close()
        w.open("else")
        w(f"{ps} {target} = 0.0f;")
        w.close()
        w.close()
    else:
        w.open(ps)
        w.open(rows)
        w(f"const int64_t {position};")
        w("float v = 0.0f;")
        w.open(f"if ({inside})")
        value = body.value(node, idx)
        w.body(body)
        w(f"v = (float){value};")
        w.close()
        w(f"{target} = v;")
        w.close()
        w.close()
    w.close()


def _patches_at(node: Node, idx: tuple[str, ...]) -> tuple[Patches, tuple[str, ...]] | None:
    """The ``Patches`` that B's ``node`` reads at ``idx`` through views, and its index there, when the tap
    (c, kh, kw) follows from the packed row ``p`` alone and the output position (oh, ow) from the column ``j``."""
    at = tuple(idx)
    while isinstance(node, View):
        at, node = tuple(node.where(at)), node.base
    if not isinstance(node, Patches) or node.rank != 2:
        return None  # read element by element through Body (its bounds tests)
    uses_p = [re.search(r"\bp\b", e) is not None for e in at]
    uses_j = [re.search(r"\bj\b", e) is not None for e in at]
    if uses_p[0] or uses_j[0] or any(uses_j[1:4]) or any(uses_p[4:]):
        return None
    return node, at


def _pack_patches(
    w: Writer, buffers: dict[int, str], names: Iterator[int], patches: Patches, at: tuple[str, ...]
) -> None:
    """B's slivers of a convolution's patches (implicit im2col), without dividing an index per element.

    Each thread tabulates the KC block's taps (channel, row and column offset) once; each sliver's columns
    get their output row and column once, and split into runs that lie in one output row. A run whose tap
    falls inside a stored input copies a row segment of it (stride apart); elsewhere (padding, an input
    computed where it is read, the columns past the last, whose rows are 0) each element is tested
    against the input's bounds.
    """
    n, c, kh, kw, oh, ow = at
    (sh, sw), (ph, pw), (dh, dw) = patches.stride, patches.padding, patches.dilation
    height, width = patches.base.shape[2:]
    w("int64_t tc[KC], ty[KC], tx[KC];")
    w.open("for (int64_t p = 0; p < kc; ++p)")
    w(f"tc[p] = {c}; ty[p] = ({kh}) * {dh}; tx[p] = ({kw}) * {dw};")
    w.close()
    w("#pragma omp for schedule(static)")
    w.open("for (int64_t js = 0; js < ns; ++js)")
    w("int64_t jy[NR], jx[NR];")
    w.open("for (int r = 0; r < NR; ++r)")
    w("const int64_t j = jc + js * NR + r;")
    w(f"jy[r] = j < jc + nc ? ({oh}) * {sh} - {ph} : INT64_MIN / 4;")
    w(f"jx[r] = ({ow}) * {sw} - {pw};")
    w.close()
    # runs of consecutive columns in one output row: in the input, one row's elements sw apart
    w("int rs[NR + 1], runs = 0;")
    w("rs[0] = 0;")
    w.open("for (int r = 1; r < NR; ++r)")
    w("if (jy[r] != jy[r - 1]) rs[++runs] = r;")
    w.close()
    w("rs[++runs] = NR;")
    w.open("for (int64_t p = 0; p < kc; ++p)")
    w("float* restrict row = bp + (js * kc + p) * NR;")
    body = Body(buffers, names=names)
    value = body.value(patches.base, (n, "tc[p]", "yy", "xx"))
    # what the tap's channel alone fixes (a BatchNorm's scale: a division and a square root), once per row of
    # the sliver, ahead of both loops below. Measured alone it gained nothing (GCC had hoisted it from the
    # element loop); written here, no loop depends on the compiler doing so. The run loop is the gain: a 1x1
    # convolution of a depthwise one's BatchNorm-ReLU went from 23-25 to 14.6-15 ms
    fixed, body.lines = invariant(body.lines, {"yy", "xx"})
    for line in fixed:
        w(line)
    w.open("for (int q = 0; q < runs; ++q)")
    w("const int r0 = rs[q], r1 = rs[q + 1];")
    base = buffers.get(id(patches.base))
    w("const int64_t y0 = jy[r0] + ty[p], x0 = jx[r0] + tx[p], x1 = jx[r1 - 1] + tx[p];")
    w.open(f"if (y0 >= 0 && y0 < {height} && x0 >= 0 && x1 < {width})")
    if base is not None:  # a stored NCHW array: the run is a row of it
        w(f"const float* restrict src = {base} + {linear((n, 'tc[p]', 'y0', 'x0'), patches.base.shape)};")
        w(f"for (int r = r0; r < r1; ++r) row[r] = src[(r - r0) * {sw}];")
    else:  # computed where it is read: along the run, with no bounds test per element (it vectorizes)
        w.pragma(SIMD)
        w.open("for (int r = r0; r < r1; ++r)")
        w(f"const int64_t yy = y0, xx = x0 + (r - r0) * {sw};")
        w.body(body)
        w(f"row[r] = (float){value};")
        w.close()
    w("continue;")
    w.close()
    w.open("for (int r = r0; r < r1; ++r)")
    w("const int64_t yy = jy[r] + ty[p], xx = jx[r] + tx[p];")
    w("float v = 0.0f;")
    w.open(f"if (yy >= 0 && yy < {height} && xx >= 0 && xx < {width})")
    w.body(body)
    w(f"v = (float){value};")
    w.close()
    w("row[r] = v;")
    w.close()
    w.close()
    w.close()
    w.close()


def _contiguous(node: Node, idx: tuple[str, ...]) -> str | None:
    """Which of ``idx``'s last two entries steps through the data read with the smaller stride (None: unknown).

    The operand's index map (views, reshapes, broadcasts) is followed down to the array
    read, and its offset evaluated at unit steps of either entry.
    """
    at: tuple[str, ...] = (*tuple(idx[:-2]), "ROW", "COL")
    while True:
        if isinstance(node, View):
            at, node = tuple(node.where(at)), node.base
        elif isinstance(node, Pointwise) and node.args:
            node = max(node.args, key=lambda a: a.numel)  # the operand that is not a broadcast constant
        elif isinstance(node, Patches):  # the output column walks the input's rows
            return idx[-1] if "COL" in at[-1] and "ROW" not in at[-1] else None
        else:
            break
    if len(at) != len(node.shape):
        return None
    offset = linear(at, node.shape)
    try:
        steps = [_offset(offset, 1, 0) - _offset(offset, 0, 0), _offset(offset, 0, 1) - _offset(offset, 0, 0)]
    except (SyntaxError, ZeroDivisionError, NameError, TypeError):
        return None
    if abs(steps[0]) == abs(steps[1]):
        return None
    return idx[-2] if abs(steps[0]) < abs(steps[1]) else idx[-1]


def _offset(expr: str, row: int, col: int) -> int:
    # the index maps' C integer arithmetic on non-negative values is Python's (// for /); other loop variables at 0
    text = re.sub(r"\b(?!ROW\b|COL\b)[A-Za-z_]\w*", "0", expr.replace("/", "//"))
    return int(eval(text, {"__builtins__": {}}, {"ROW": row, "COL": col}))


# B's slivers of block (jc, pc) in a buffer holding the whole of a prepacked B: the column blocks before
# jc (each KILN_NCP wide, K deep), then the KC-deep blocks of this one before pc (ns slivers NR wide each)
PREPACKED_AT = "(jc / NC) * KILN_NCP * {k} + pc * ns * NR"


def prepackable(mm: Matmul) -> bool:
    """Whether ``mm``'s B is the same on every call unless a parameter changes (it reads parameters and
    constants only) and on every batch index (the product has none): packed once, under ``PREPACK``."""
    return math.prod(mm.shape[:-2]) == 1 and constant(mm.b)


def emit_prepack(w: Writer, buffers: dict[int, str], names: Iterator[int], mm: Matmul, tag: str) -> None:
    """``{tag}_bf``: the whole of B in the slivers the loop nest reads (``PREPACKED_AT``), packed again only
    when the call's ``stamp`` differs from the last packing's: the candidate changes it when a parameter is
    written in place (its version counter) and per model instance, so no stale or foreign weights are read."""
    n, k = mm.shape[-1], mm.a.shape[-1]
    lead = ("0",) * (len(mm.shape) - 2)
    w(f"static float* {tag}_bf; static size_t {tag}_bfh; static int64_t {tag}_stamp = -1;")
    w.open(f"if ({tag}_stamp != stamp)")
    w(f"float* bf = kiln_grow(&{tag}_bf, &{tag}_bfh, (size_t)(({n} + NC - 1) / NC) * KILN_NCP * {k});")
    w("if (!bf) abort();")
    w("#pragma omp parallel num_threads(nt)")
    w.open("")
    open_b_blocks(w, n, k)
    w(f"float* restrict bp = bf + {PREPACKED_AT.format(k=k)};")
    pack_b(w, buffers, names, mm, lead)
    w.close()
    w.close()
    w.close()
    w(f"{tag}_stamp = stamp;")
    w.close()


def open_b_blocks(w: Writer, n: int | str, k: int | str) -> None:
    """Open the (jc, pc) loops over B's NC-wide, KC-deep blocks, defining ``nc``, ``ns`` and ``kc``."""
    w.open(f"for (int64_t jc = 0; jc < {n}; jc += NC)")
    w(f"const int64_t nc = KILN_MIN((int64_t)NC, {n} - jc), ns = (nc + NR - 1) / NR;")
    w.open(f"for (int64_t pc = 0; pc < {k}; pc += KC)")
    w(f"const int64_t kc = KILN_MIN((int64_t)KC, {k} - pc);")


def pack_b(w: Writer, buffers: dict[int, str], names: Iterator[int], mm: Matmul, lead: tuple[str, ...]) -> None:
    """Pack block (jc, pc) of ``mm``'s B into ``bp`` as NR-wide slivers ``bp[js][p][r]``."""
    pack(
        w,
        buffers,
        names,
        mm.b,
        (*lead, "pc + p", "j"),
        "js",
        "ns",
        "NR",
        "j = jc + js * NR + r",
        "j < jc + nc",
        "bp[(js * kc + p) * NR + r]",
    )
