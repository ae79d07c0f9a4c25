"""``CONV=blocked``: a register-blocked direct convolution, for a product whose B is a stride-1 convolution's
patches (2- or 3-d, grouped or not: a grouped one runs per group, a 3-d one over planes of rows).

Implicit GEMM packs the patches (an im2col of the input, K = C*KH*KW rows per output position) before
the micro-kernel reads them; with few output channels (M) each packed element feeds only M multiply-adds,
so the packing costs about as much as the arithmetic. Here, per image, the input is copied once into a
zero-bordered scratch (the padding becomes data: no test in the inner loop) and the weights into
``wp[c][kh][kw][co]``; then a tile of MR output channels by NR output columns of one output row stays in
vector registers while, for every (c, kh, kw), NR/VW unaligned vectors of one scratch row are loaded
and each multiplied by MR broadcast weights. The product's epilogue runs on each finished tile
(``gemm.emit_epilogue``), as implicit GEMM's does.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from kernelkiln.lowering.body import Body
from kernelkiln.lowering.graph import Matmul, Node, Patches, View
from kernelkiln.lowering.loops import Writer


def blocked_patches(mm: Matmul, buffers: dict[int, str]) -> Patches | None:
    """The patches B is, when this kernel computes ``mm``: a 2- or 3-d, stride-1 float convolution of a
    stored input, B the patches reshaped to (N, G, C/G*[KD*]KH*KW, [OD*]OH*OW) over G groups."""
    b: Node = mm.b
    while isinstance(b, View) and b.kind == "reshape":
        b = b.base
    if not isinstance(b, Patches) or any(s != 1 for s in b.stride):
        return None
    n, c = b.shape[:2]
    taps, out = b.shape[2 : 2 + b.rank], b.shape[2 + b.rank :]
    if len(mm.shape) != 4 or mm.shape[0] != n or c % mm.shape[1] or b.ctype != "float":
        return None
    groups = mm.shape[1]
    if mm.b.shape != (n, groups, c // groups * math.prod(taps), math.prod(out)):
        return None
    if b.base.ctype != "float" or stored(b.base, buffers) is None or any(p < 0 for p in b.padding):
        return None
    return b


def stored(node: Node, buffers: dict[int, str]) -> str | None:
    """The buffer holding ``node``'s elements in its own order (through reshapes: a 1-d convolution's input
    as height 1), or None when it is computed where it is read."""
    while id(node) not in buffers and isinstance(node, View) and node.kind == "reshape":
        node = node.base
    return buffers.get(id(node))


def _sizes(mm: Matmul, patches: Patches) -> tuple[int, int, str, str]:
    """(scratch planes per channel, rows per plane, row length, output channels padded to MR), the last two as
    C expressions; a 2-d convolution has one plane."""
    r = patches.rank
    kh, kw, oh, ow = (*patches.shape[r : r + 2], *patches.shape[-2:])
    (dh, dw) = patches.dilation[-2:]
    planes = 1
    if r == 3:
        kd, od = patches.shape[2], patches.shape[5]
        planes = od + (kd - 1) * patches.dilation[0]
    return (
        planes,
        oh + (kh - 1) * dh,
        f"((({ow} + NR - 1) / NR) * NR + {(kw - 1) * dw})",
        f"(({mm.shape[-2]} + MR - 1) / MR * MR)",
    )


def alloc_blocked(w: Writer, mm: Matmul, patches: Patches, tag: str) -> None:
    """The scratch buffers, grown before the parallel region (one thread): ``xs`` and ``ws``."""
    c, taps = patches.shape[1] // mm.shape[1], math.prod(patches.shape[2 : 2 + patches.rank])
    planes, hp, row, co = _sizes(mm, patches)
    w(f"static float* {tag}_xs; static size_t {tag}_xh; static float* {tag}_ws; static size_t {tag}_wh;")
    w(f"float* xs = kiln_grow(&{tag}_xs, &{tag}_xh, (size_t){c * planes * hp} * {row});")
    w(f"float* ws = kiln_grow(&{tag}_ws, &{tag}_wh, (size_t){c * taps} * {co});")
    w("if (!xs || !ws) abort();")


def emit_blocked(
    w: Writer, buffers: dict[int, str], names: Iterator[int], mm: Matmul, patches: Patches, lead: tuple[str, ...]
) -> None:
    """For one image (inside the batch loop, all threads; C's block at ``cb``): scratch copies, then the tiles,
    each ending with ``ti, mr, tj, nr`` (its rows and columns of C) set for the epilogue the caller emits
    next; ``close_blocked`` closes the tile loops after it. A 3-d convolution's scratch is planes of rows, and
    its tiles run over (output plane, output row) and sum over the planes' taps too. A grouped one's product
    runs per (image, group): its scratch holds the group's channels."""
    deep = patches.rank == 3
    _, channels, *rest = patches.shape
    c = channels // mm.shape[1]
    kd, od = (rest[0], rest[3]) if deep else (1, 1)
    kh, kw, oh, ow = (rest[1], rest[2], rest[4], rest[5]) if deep else tuple(rest)
    (dh, dw), (ph, pw) = patches.dilation[-2:], patches.padding[-2:]
    dd, pd = (patches.dilation[0], patches.padding[0]) if deep else (1, 0)
    height, width = patches.base.shape[-2:]
    depth = patches.base.shape[2] if deep else 1
    planes, hp, wp_, co = _sizes(mm, patches)
    cols = ow * oh * od
    image = f"{stored(patches.base, buffers)} + ({lead[0]}) * {channels * depth * height * width}"
    if mm.shape[1] > 1:
        image += f" + ({lead[1]}) * {c * depth * height * width}"
    # the weights as ws[p][co], co padded with zeros to a multiple of MR
    w("#pragma omp for schedule(static)")
    w.open(f"for (int64_t p = 0; p < {c * kd * kh * kw}; ++p)")
    w.open(f"for (int64_t i = 0; i < {co}; ++i)")
    w("float v = 0.0f;")
    w.open(f"if (i < {mm.shape[-2]})")
    body = Body(buffers, names=names)
    value = body.value(mm.a, (*lead, "i", "p"))
    w.body(body)
    w(f"v = (float){value};")
    w.close()
    w(f"ws[p * {co} + i] = v;")
    w.close()
    w.close()
    # the input with its zero border: row y, column x of the scratch is the input's (y - ph, x - pw)
    w("#pragma omp for schedule(static)")
    w.open(f"for (int64_t cy = 0; cy < {c * planes * hp}; ++cy)")
    if deep:  # plane z too, the input's z - pd
        w(f"const int64_t ch = cy / {planes * hp}, z = cy / {hp} % {planes} - {pd}, y = cy % {hp} - {ph};")
        w(f"float* restrict dst = xs + cy * {wp_};")
        w.open(f"if (z < 0 || z >= {depth} || y < 0 || y >= {height})")
    else:
        w(f"const int64_t ch = cy / {hp}, y = cy % {hp} - {ph};")
        w(f"float* restrict dst = xs + cy * {wp_};")
        w.open(f"if (y < 0 || y >= {height})")
    w(f"memset(dst, 0, sizeof(float) * {wp_});")
    w("continue;")
    w.close()
    plane = f"(ch * {depth} + z) * {height}" if deep else f"ch * {height}"
    w(f"const float* restrict src = {image} + ({plane} + y) * {width};")
    w(f"for (int64_t xx = 0; xx < {wp_}; ++xx) dst[xx] = xx >= {pw} && xx - {pw} < {width} ? src[xx - {pw}] : 0.0f;")
    w.close()
    w("#pragma omp for collapse(2) schedule(static)")
    w.open(f"for (int64_t ti = 0; ti < {mm.shape[-2]}; ti += MR)")
    if deep:
        w.open(f"for (int64_t zy = 0; zy < {od * oh}; ++zy)")
        w(f"const int64_t z = zy / {oh}, y = zy % {oh};")
    else:
        w.open(f"for (int64_t y = 0; y < {oh}; ++y)")
    w.open(f"for (int64_t x0 = 0; x0 < {ow}; x0 += NR)")
    w(f"const int64_t mr = KILN_MIN((int64_t)MR, {mm.shape[-2]} - ti), nr = KILN_MIN((int64_t)NR, {ow} - x0);")
    w(f"const int64_t tj = {'zy' if deep else 'y'} * {ow} + x0;")
    w("kiln_vf acc[MR][KILN_NV];")
    w("KILN_PRAGMA(GCC unroll 16) for (int r = 0; r < MR; ++r)")
    w("    KILN_PRAGMA(GCC unroll 8) for (int v = 0; v < KILN_NV; ++v) acc[r][v] = (kiln_vf){0};")
    w.open(f"for (int64_t ch = 0; ch < {c}; ++ch)")
    if deep:
        w.open(f"for (int64_t kz = 0; kz < {kd}; ++kz)")
        w.open(f"for (int64_t ky = 0; ky < {kh}; ++ky)")
        w(f"const float* restrict row = xs + ((ch * {planes} + z + kz * {dd}) * {hp} + y + ky * {dh}) * {wp_} + x0;")
        w(f"const float* restrict wk = ws + ((ch * {kd} + kz) * {kh} + ky) * {kw} * {co} + ti;")
    else:
        w.open(f"for (int64_t ky = 0; ky < {kh}; ++ky)")
        w(f"const float* restrict row = xs + (ch * {hp} + y + ky * {dh}) * {wp_} + x0;")
        w(f"const float* restrict wk = ws + (ch * {kh} + ky) * {kw} * {co} + ti;")
    w.open(f"KILN_PRAGMA(GCC unroll 8) for (int64_t kx = 0; kx < {kw}; ++kx)")
    w("kiln_vf xv[KILN_NV];")
    w("KILN_PRAGMA(GCC unroll 8) for (int v = 0; v < KILN_NV; ++v)")
    w(f"    xv[v] = *(const kiln_vfu*)(row + kx * {dw} + v * KILN_VW);")
    w.open("KILN_PRAGMA(GCC unroll 16) for (int r = 0; r < MR; ++r)")
    w(f"const kiln_vf av = KILN_BCAST(wk + kx * {co} + r);")
    w("KILN_PRAGMA(GCC unroll 8) for (int v = 0; v < KILN_NV; ++v) acc[r][v] = KILN_FMA(av, xv[v], acc[r][v]);")
    w.close()
    w.close()
    w.close()
    if deep:
        w.close()
    w.close()
    w.open("if (mr == MR && nr == NR)")
    w("KILN_PRAGMA(GCC unroll 16) for (int r = 0; r < MR; ++r)")
    w("    KILN_PRAGMA(GCC unroll 8) for (int v = 0; v < KILN_NV; ++v)")
    w(f"        *(kiln_vfu*)(cb + (ti + r) * {cols} + tj + v * KILN_VW) = acc[r][v];")
    w.close("} else {")
    w.depth += 1
    w("float tile[MR * NR] __attribute__((aligned(64)));")
    w("for (int r = 0; r < MR; ++r)")
    w("    for (int v = 0; v < KILN_NV; ++v) *(kiln_vf*)(tile + r * NR + v * KILN_VW) = acc[r][v];")
    w("for (int64_t i = 0; i < mr; ++i)")
    w(f"    for (int64_t j = 0; j < nr; ++j) cb[(ti + i) * {cols} + tj + j] = tile[i * NR + j];")
    w.close()


def close_blocked(w: Writer) -> None:
    """The tile loops ``emit_blocked`` opened (x0, y, ti), after the caller's epilogue."""
    w.close()
    w.close()
    w.close()


def blocked_tiles(convs: list[tuple[int, int]], options: dict[str, list[int]], lanes: int) -> tuple[int, int]:
    """The (MR, NR) a candidate whose blocked convolutions do most of its products' work starts from: the least work in
    padded tiles over ``convs`` (output channels, output width), among the tiles whose accumulators, input
    vectors and broadcast fit the vector registers (32 with 16 lanes, else 16); ties go to the tile with the
    most multiply-adds per load."""
    registers = 32 if lanes >= 16 else 16
    fits = [
        (mr, nr)
        for mr in options["MR"]
        for nr in options["NR"]
        if nr % lanes == 0 and mr * (nr // lanes) + nr // lanes + 1 <= registers
    ]

    def cost(tile: tuple[int, int]) -> tuple[int, float]:
        mr, nr = tile
        padded = sum(-(-co // mr) * mr * -(-ow // nr) * nr for co, ow in convs)
        nv = nr // lanes
        return padded, -(mr * nv) / (mr + nv)

    return min(fits, key=cost)
