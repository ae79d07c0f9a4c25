"""Loop nests of their own: column reductions, scans and pooling windows."""

from __future__ import annotations

import math
from typing import cast

from kernelkiln.lowering.body import Body
from kernelkiln.lowering.depthwise import depthwise
from kernelkiln.lowering.graph import FLOATS, Reduce, Scan, Window, linear
from kernelkiln.lowering.loops import (
    INIT,
    LOOP,
    SIMD,
    Writer,
    combine,
    decompose,
    flat_position,
    open_loops,
    parallel,
    var,
)
from kernelkiln.lowering.pointwise import literal
from kernelkiln.lowering.schedule import Kernel
from kernelkiln.platforms.host import simd_floats

_CHUNK_BYTES = 256  # a column chunk's accumulators: 8 AVX (4 AVX-512) registers
_SCAN_ROWS = 8  # rows a scan advances together
_WHOLE_ROW_VECTORS = 16  # a kept row this many vectors wide or less is one chunk: the reads stream


def _blocks(w: Writer, shape: tuple[int, ...], outer: list[int], first: int) -> None:
    """One parallel loop over (outer row, block of TILE indices of dim ``first``); declares b, e and i{outer}."""
    rows = math.prod(shape[d] for d in outer)
    w.reads("TILE")
    w(f"const int64_t nb = ({shape[first]} + TILE - 1) / TILE;")
    pragma = parallel(math.prod(shape))
    if pragma:
        w(pragma)
    w.open(f"for (int64_t ob = 0; ob < {rows} * nb; ++ob)")
    w(f"const int64_t o = ob / nb, b = (ob % nb) * TILE, e = KILN_MIN(b + TILE, (int64_t){shape[first]});")
    decompose(w, shape, outer, "o")


def _slot(shape: tuple[int, ...], first: int, rest: list[int]) -> str:
    """The accumulator index of (i{first} - b, rest...) in a TILE × prod(rest) block."""
    width = math.prod(shape[d] for d in rest)
    inner = linear(tuple(var(shape, d) for d in rest), tuple(shape[d] for d in rest)) if rest else "0"
    return f"(i{first} - b) * {width} + {inner}"


def _block_loops(w: Writer, shape: tuple[int, ...], first: int, rest: list[int]) -> int:
    if not any(shape[d] != 1 for d in rest):
        w.pragma(LOOP)
    w.open(f"for (int64_t i{first} = b; i{first} < e; ++i{first})")
    return 1 + open_loops(w, shape, rest, LOOP)


def column(w: Writer, buffers: dict[int, str], k: Kernel) -> None:
    """A reduction whose innermost dims are kept: accumulate a block of output columns per thread."""
    r = cast(Reduce, k.node)
    shape, dims = r.arg.shape, set(r.dims)
    tail: list[int] = []
    for d in reversed(range(len(shape))):
        if d in dims:
            break
        tail.insert(0, d)
    outer = [d for d in range(len(shape)) if d not in dims and d not in tail]
    first, rest = tail[0], tail[1:]
    width = math.prod(shape[d] for d in rest)
    arg = r.op in ("argmax", "argmin")
    vt = r.arg.ctype if (arg and r.arg.ctype in FLOATS) else ("double" if arg else r.ctype)
    _blocks(w, shape, outer, first)
    size = 8 if vt in ("double", "int64_t") else 4
    lanes = simd_floats() * 4 // size
    # a kept row of at most 16 vectors is one chunk (the reads walk the input in order: a sum over the middle
    # dim of 16x256x256 2.0-2.5x faster than in 256-byte chunks, each a strided stream); wider rows keep the
    # 256-byte chunk (a 1 KB one was 0.72x on 64x8x4096, a 512-byte one no faster on either)
    whole = shape[first] <= _WHOLE_ROW_VECTORS * lanes and shape[first] % lanes == 0
    chunk = shape[first] if whole else _CHUNK_BYTES // size
    reduced_count = math.prod(shape[d] for d in dims)
    chunked = width == 1 and shape[first] % chunk == 0 and (not arg or (whole and reduced_count < 2**31))
    if chunked:
        w(f"#if TILE >= {chunk}" if whole else f"#if TILE % {chunk} == 0")
        _chunked_column(w, buffers, r, vt, chunk, first, sorted(dims))
        w("#else")
    w(f"{vt}* restrict acc = ({vt}*)malloc(sizeof({vt}) * TILE * {width});")
    if arg:
        w(f"int64_t* pos = (int64_t*)calloc(TILE * {width}, sizeof(int64_t));")
    w(f"for (int64_t t = 0; t < TILE * {width}; ++t) acc[t] = {INIT[r.op]};")
    reduced = [d for d in range(len(shape)) if d in dims]
    opened = open_loops(w, shape, reduced)
    opened += _block_loops(w, shape, first, rest)
    body = Body(buffers)
    v = body.value(r.arg, tuple(var(shape, d) for d in range(len(shape))))
    w.body(body)
    slot = _slot(shape, first, rest)
    if arg:
        position = flat_position(shape, [d for d in reduced if shape[d] != 1])
        better = ">" if r.op == "argmax" else "<"
        w(f"if (({vt}){v} {better} acc[{slot}]) {{ acc[{slot}] = ({vt}){v}; pos[{slot}] = {position}; }}")
    else:
        w(f"acc[{slot}] = {combine(r.op, f'acc[{slot}]', f'({vt}){v}')};")
    for _ in range(opened):
        w.close()
    opened = _block_loops(w, shape, first, rest)
    idx = tuple("0" if d in dims else var(shape, d) if d != first else f"i{first}" for d in range(len(shape)))
    scale = "" if r.scale == 1.0 else f" * {literal(r.scale, r.ctype)}"
    w(f"{buffers[id(r)]}[{linear(idx, r.shape)}] = {'pos' if arg else 'acc'}[{slot}]{scale};")
    for _ in range(opened):
        w.close()
    w("free(acc);" + (" free(pos);" if arg else ""))
    if chunked:
        w("#endif")
    w.close()


def _chunked_column(
    w: Writer, buffers: dict[int, str], r: Reduce, vt: str, chunk: int, first: int, reduced: list[int]
) -> None:
    """The block's columns in chunks whose accumulators stay in vector registers over all the reduced rows.

    A block-wide accumulator in memory costs a load and a store per element read; a chunk of a
    constant 256 bytes (8 AVX registers), or the whole kept row when it is narrow, is unrolled whole
    and kept in registers. argmax and argmin keep each column's position beside its value.
    """
    shape = r.arg.shape
    arg = r.op in ("argmax", "argmin")
    w.open(f"for (int64_t cb = b; cb < e; cb += {chunk})")
    w(f"{vt} acc[{chunk}];")
    w(f"for (int c = 0; c < {chunk}; ++c) acc[c] = {INIT[r.op]};")
    if arg:
        w(f"int32_t pos[{chunk}];")  # half the registers of int64_t positions (column: extents under 2^31)
        w(f"for (int c = 0; c < {chunk}; ++c) pos[c] = 0;")
    opened = open_loops(w, shape, reduced)
    w.pragma(SIMD)
    w.open(f"for (int c = 0; c < {chunk}; ++c)")
    w(f"const int64_t i{first} = cb + c;")
    body = Body(buffers)
    v = body.value(r.arg, tuple(var(shape, d) for d in range(len(shape))))
    w.body(body)
    if arg:
        position = flat_position(shape, [d for d in reduced if shape[d] != 1])
        better = ">" if r.op == "argmax" else "<"
        w(f"const {vt} x = ({vt}){v};")
        w(f"const int take = x {better} acc[c];")
        w("acc[c] = take ? x : acc[c];")
        w(f"pos[c] = take ? (int32_t)({position}) : pos[c];")
    else:
        w(f"acc[c] = {combine(r.op, 'acc[c]', f'({vt}){v}')};")
    for _ in range(opened + 1):
        w.close()
    w.open(f"for (int c = 0; c < {chunk}; ++c)")
    w(f"const int64_t i{first} = cb + c;")
    idx = tuple("0" if d in reduced else var(shape, d) if d != first else f"i{first}" for d in range(len(shape)))
    scale = "" if r.scale == 1.0 or arg else f" * {literal(r.scale, r.ctype)}"
    w(f"{buffers[id(r)]}[{linear(idx, r.shape)}] = {'(int64_t)pos' if arg else 'acc'}[c]{scale};")
    w.close()
    w.close()


def scan(w: Writer, buffers: dict[int, str], k: Kernel) -> None:
    """A running sum or product along one dim; float sums accumulate in double, as torch's CPU kernel does."""
    s = cast(Scan, k.node)
    shape, d = s.shape, s.dim
    acc_type = "double" if s.ctype in FLOATS else s.ctype
    outer = list(range(d))
    tail = list(range(d + 1, len(shape)))
    init = "0" if s.op == "sum" else "1"
    step = "+" if s.op == "sum" else "*"
    idx = tuple(var(shape, e) if e != d else f"i{d}" for e in range(len(shape)))
    live_tail = [e for e in tail if shape[e] != 1]
    if not live_tail:
        # each row's running value is a chain of dependent adds (or multiplies): _SCAN_ROWS rows advance
        # together, their chains independent, so the core overlaps them instead of waiting out each add
        rows = math.prod(shape[e] for e in outer + tail)
        g = _SCAN_ROWS
        pragma = parallel(math.prod(shape))
        if pragma:
            w(pragma)
        w.open(f"for (int64_t og = 0; og < {-(-rows // g)}; ++og)")
        w.open(f"if (og * {g} + {g} <= {rows})")
        w(f"{acc_type} acc[{g}];")
        w(f"for (int g = 0; g < {g}; ++g) acc[g] = {init};")
        w.open(f"for (int64_t i{d} = 0; i{d} < {shape[d]}; ++i{d})")
        w(f"KILN_PRAGMA(GCC unroll {g})")
        w.open(f"for (int g = 0; g < {g}; ++g)")
        _scan_step(w, buffers, s, outer, idx, f"og * {g} + g", "acc[g]", acc_type, step)
        w.close()
        w.close()
        w.close("} else {")
        w.depth += 1
        w.open(f"for (int64_t o = og * {g}; o < {rows}; ++o)")
        w(f"{acc_type} acc = {init};")
        w.open(f"for (int64_t i{d} = 0; i{d} < {shape[d]}; ++i{d})")
        _scan_step(w, buffers, s, outer, idx, "o", "acc", acc_type, step)
        w.close()
        w.close()
        w.close()
        w.close()
        return
    first, rest = live_tail[0], live_tail[1:]
    width = math.prod(shape[e] for e in rest)
    _blocks(w, shape, outer, first)
    w(f"{acc_type}* restrict acc = ({acc_type}*)malloc(sizeof({acc_type}) * TILE * {width});")
    w(f"for (int64_t t = 0; t < TILE * {width}; ++t) acc[t] = {init};")
    w.open(f"for (int64_t i{d} = 0; i{d} < {shape[d]}; ++i{d})")
    opened = _block_loops(w, shape, first, rest)
    body = Body(buffers)
    full = tuple(f"i{e}" if e in (d, first) else var(shape, e) for e in range(len(shape)))
    v = body.value(s.arg, full)
    w.body(body)
    slot = _slot(shape, first, rest)
    w(f"acc[{slot}] = acc[{slot}] {step} ({acc_type}){v};")
    w(f"{buffers[id(s)]}[{linear(full, shape)}] = ({s.ctype})acc[{slot}];")
    for _ in range(opened + 1):
        w.close()
    w("free(acc);")
    w.close()


def _scan_step(
    w: Writer,
    buffers: dict[int, str],
    s: Scan,
    outer: list[int],
    idx: tuple[str, ...],
    row: str,
    acc: str,
    acc_type: str,
    step: str,
) -> None:
    """One element of row ``row``'s scan: read it, advance ``acc``, write the running value."""
    w.open("")
    decompose(w, s.shape, outer, f"({row})")
    body = Body(buffers)
    v = body.value(s.arg, idx)
    w.body(body)
    w(f"{acc} = {acc} {step} ({acc_type}){v};")
    w(f"{buffers[id(s)]}[{linear(idx, s.shape)}] = ({s.ctype}){acc};")
    w.close()


def window(w: Writer, buffers: dict[int, str], k: Kernel) -> None:
    """Max or average pooling over the trailing dims, with PyTorch's padding and divisor rules (a depthwise
    convolution's window: ``depthwise``)."""
    p = cast(Window, k.node)
    if p.op == "dot":
        depthwise(w, buffers, p)
        return
    out, src = p.shape, p.arg.shape
    rank = len(p.kernel)
    lead = len(out) - rank
    spatial = list(range(lead, len(out)))
    head = [d for d in range(len(out)) if d != len(out) - 1]
    rows = math.prod(out[d] for d in head)
    pragma = parallel(math.prod(out) * math.prod(p.kernel))
    if pragma:
        w(pragma)
    w.open(f"for (int64_t o = 0; o < {rows}; ++o)")
    decompose(w, out, head, "o")
    last = len(out) - 1
    w.open(f"for (int64_t i{last} = 0; i{last} < {out[last]}; ++i{last})")
    acc = "double" if p.ctype == "double" else "float"
    w(f"{acc} acc = {'-INFINITY' if p.op == 'max' else '0'};")
    for j, d in enumerate(spatial):
        size, kk, st, pad = src[d], p.kernel[j], p.stride[j], p.padding[j]
        o = f"i{d}" if out[d] != 1 else "0"
        w(f"const int64_t s{j} = ({o}) * {st} - {pad};")
        if p.op == "avg":
            w(f"const int64_t e{j} = KILN_MIN(s{j} + {kk}, (int64_t){size + pad});")
            w(f"const int64_t n{j} = e{j} - s{j};")
            w(f"const int64_t lo{j} = s{j} < 0 ? 0 : s{j}, hi{j} = KILN_MIN(e{j}, (int64_t){size});")
    for j, d in enumerate(spatial):
        w.open(f"for (int64_t k{j} = 0; k{j} < {p.kernel[j]}; ++k{j})")
        w(f"const int64_t x{j} = s{j} + k{j} * {p.dilation[j]};")
        w(f"if (x{j} < 0 || x{j} >= {src[d]}) continue;")
    body = Body(buffers)
    idx = tuple((f"x{d - lead}" if d >= lead else var(out, d)) for d in range(len(src)))
    v = body.value(p.arg, idx)
    w.body(body)
    w(f"acc = {combine('max', 'acc', f'({acc}){v}')};" if p.op == "max" else f"acc += ({acc}){v};")
    for _ in spatial:
        w.close()
    where = tuple(var(out, d) if d != last else f"i{last}" for d in range(len(out)))
    target = f"{buffers[id(p)]}[{linear(where, out)}]"
    if p.op == "max":
        w(f"{target} = acc;")
    else:
        if p.divisor:
            divide = str(int(p.divisor))
        elif p.count_include_pad:
            divide = " * ".join(f"n{j}" for j in range(rank))
        else:
            divide = " * ".join(f"(hi{j} - lo{j})" for j in range(rank))
        w(f"{target} = acc / ({acc})({divide});")
    w.close()
    w.close()
