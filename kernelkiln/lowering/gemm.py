"""The GEMM kernel: packed panels, a register-blocked micro-kernel, and a fused epilogue.

BLIS's loop nest: for each NC-wide block of columns and KC-deep block of the shared
dimension, the threads pack B's block into NR-wide slivers; for each block of MC rows
they pack A's rows into MR-tall slivers (both read through the graph, so a transposed,
broadcast or elementwise operand is packed where it is read) and share out B's
slivers; the micro-kernel keeps an MR×NR tile of C in vector registers over KC steps
of FMAs. Where B comes in several NC-wide blocks and A is small (an LM head: 128 rows, a
50k-column vocabulary), A is packed whole once per call instead of once per block; and each
tile of a B sliver prefetches its share of the next sliver into L2, so a weight streamed from
memory does not stall the next sliver. After the last KC block, the writes that read the
product at their own position (bias, activations, scaling, also through a reshape: the
epilogue) run on the tile just finished, while it is in L1.

The micro-kernel's vector width follows the compiler's target: 16 floats when the CPU
has AVX-512 and NR is a multiple of 16, 8 with AVX, else 4; the knob options follow the
CPU's features (``gemm_vocabulary``), detected, never assumed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from kernelkiln.lowering.body import Body
from kernelkiln.lowering.conv_blocked import alloc_blocked, blocked_patches, close_blocked, emit_blocked, stored
from kernelkiln.lowering.graph import Matmul, Node, Patches, contiguous_strides, linear
from kernelkiln.lowering.loops import LOOP, Writer, decompose
from kernelkiln.lowering.packing import PREPACKED_AT, emit_prepack, open_b_blocks, pack, pack_b, prepackable
from kernelkiln.platforms.host import cpu_flags

GEMM_HEADER = r"""#include <immintrin.h>
#include <omp.h>
#include <string.h>
#ifndef MR
#define MR 6
#endif
#ifndef NR
#define NR 16
#endif
#ifndef MC
#define MC 96
#endif
#ifndef KC
#define KC 256
#endif
#ifndef NC
#define NC 4096
#endif
#ifndef PREPACK
#define PREPACK 1
#endif
#if defined(__AVX512F__) && NR % 16 == 0
#define KILN_VW 16
#define KILN_FMA(a, b, c) ((kiln_vf)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#define KILN_BCAST(p) ((kiln_vf)_mm512_set1_ps(*(p)))
#elif defined(__AVX__) && NR % 8 == 0
#define KILN_VW 8
#define KILN_BCAST(p) ((kiln_vf)_mm256_broadcast_ss(p))
#ifdef __FMA__
#define KILN_FMA(a, b, c) ((kiln_vf)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#endif
#else
#define KILN_VW 4
#endif
#ifndef KILN_BCAST
#define KILN_BCAST(p) ((kiln_vf){0} + *(p))
#endif
#ifndef KILN_FMA
#define KILN_FMA(a, b, c) ((a) * (b) + (c))
#endif
#if NR % KILN_VW != 0
#error "NR must be a multiple of the vector width"
#endif
#define KILN_NV (NR / KILN_VW)
#define KILN_MCP ((MC + MR - 1) / MR * MR)
#define KILN_PAD(m) (((m) + MR - 1) / MR * MR)
/* the most floats of A packed whole, once per call, where B comes in several NC-wide blocks */
#define KILN_A_WHOLE (1 << 17)
#define KILN_NCP ((NC + NR - 1) / NR * NR)
typedef float kiln_vf __attribute__((vector_size(KILN_VW * 4)));
typedef float kiln_vfu __attribute__((vector_size(KILN_VW * 4), aligned(4)));

/* C[MR x NR] (row stride ldc) = (add ? C : 0) + A sliver (kc x MR) . B sliver (kc x NR); A_AT(i, p) is the
   address of A's element at the tile's row i, step p: packed (kiln_micro) or where A lies (kiln_micro_rows,
   a skinny product's A, used once: not packed; its tile's rows at a[i]). ``next`` is this tile's share of
   the B sliver the following tiles read, ``lines`` cache lines of it fetched into L2 one per step: each
   tile of a sliver fetches its share, so a B streamed from memory (a large weight, read once per call)
   does not stall the next sliver, and the fetches never come in a burst the cache drops */
#define KILN_MICRO_DEF(name, a_type, A_AT)                                                                  \
    static inline void name(int64_t kc, a_type a, const float* restrict b, float* restrict c, int64_t ldc,   \
                            int add, const float* next, int64_t lines) {                                     \
        kiln_vf acc[MR][KILN_NV];                                                                            \
        KILN_PRAGMA(GCC unroll 16) for (int i = 0; i < MR; ++i)                                              \
            KILN_PRAGMA(GCC unroll 8) for (int j = 0; j < KILN_NV; ++j) acc[i][j] = (kiln_vf){0};            \
        for (int64_t p = 0; p < kc; ++p) {                                                                   \
            kiln_vf bv[KILN_NV];                                                                             \
            if (p < lines) __builtin_prefetch(next + p * 16, 0, 2);                                          \
            KILN_PRAGMA(GCC unroll 8) for (int j = 0; j < KILN_NV; ++j)                                      \
                bv[j] = *(const kiln_vf*)(b + p * NR + j * KILN_VW);                                         \
            KILN_PRAGMA(GCC unroll 16) for (int i = 0; i < MR; ++i) {                                        \
                const kiln_vf av = KILN_BCAST(A_AT(i, p));                                                   \
                KILN_PRAGMA(GCC unroll 8) for (int j = 0; j < KILN_NV; ++j)                                  \
                    acc[i][j] = KILN_FMA(av, bv[j], acc[i][j]);                                              \
            }                                                                                                \
        }                                                                                                    \
        KILN_PRAGMA(GCC unroll 16) for (int i = 0; i < MR; ++i)                                              \
            KILN_PRAGMA(GCC unroll 8) for (int j = 0; j < KILN_NV; ++j) {                                    \
                kiln_vfu* dst = (kiln_vfu*)(c + i * ldc + j * KILN_VW);                                      \
                *dst = add ? *dst + acc[i][j] : acc[i][j];                                                   \
            }                                                                                                \
    }
/* the rows of C the next tile down writes, fetched for writing while this tile computes (a C too large for
   the cache, an LM head's logits, otherwise stalls each tile's stores on reading its lines first) */
#define KILN_PREFETCH_C(c, ldc)                                                                             \
    for (int r_ = 0; r_ < MR; ++r_)                                                                          \
        for (int l_ = 0; l_ < NR; l_ += 16) __builtin_prefetch((c) + r_ * (ldc) + l_, 1, 3)
#define KILN_PACKED_AT(i, p) (a + (p) * MR + (i))
#define KILN_ROWS_AT(i, p) (a[i] + (p))
KILN_MICRO_DEF(kiln_micro, const float* restrict, KILN_PACKED_AT)
KILN_MICRO_DEF(kiln_micro_rows, const float* const*, KILN_ROWS_AT)

/* A grow-only scratch buffer, 64-byte aligned, kept across calls (no page faults per call). */
static float* kiln_grow(float** slot, size_t* have, size_t need) {
    if (need > *have) {
        free(*slot);
        *slot = aligned_alloc(64, (need * sizeof(float) + 63) / 64 * 64);
        *have = *slot ? need : 0;
    }
    return *slot;
}
"""

GEMM_MIN = 1 << 15  # multiply-adds below which a product is a plain reduction loop: packing costs more
GEMM_KNOBS = ("MR", "NR", "MC", "KC", "NC")


def gemm_vocabulary() -> tuple[dict[str, list[int]], dict[str, int]]:
    """(options, defaults) of the GEMM knobs for this CPU: register tiles that fit its vector registers."""
    flags = cpu_flags()
    if "avx512f" in flags:
        tiles, defaults = {"MR": [4, 6, 8, 12, 14], "NR": [16, 32, 48]}, {"MR": 12, "NR": 32}
    elif "avx" in flags:
        tiles, defaults = {"MR": [4, 6, 8], "NR": [8, 16, 24]}, {"MR": 6, "NR": 16}
    else:
        tiles, defaults = {"MR": [4, 6, 8], "NR": [4, 8, 12]}, {"MR": 6, "NR": 8}
    options = {**tiles, "MC": [48, 96, 144, 192, 288], "KC": [128, 256, 384, 512], "NC": [512, 1024, 4096, 8192]}
    return options, {**defaults, "MC": 96, "KC": 256, "NC": 4096}


def emit_gemm(
    w: Writer, buffers: dict[int, str], mm: Matmul, writes: list[Node], names: Iterator[int], tag: str
) -> Patches | None:
    """The loop nest computing ``mm`` into its buffer and ``writes`` (its epilogue) tile by tile; a stride-1
    convolution's also as a register-blocked direct one, under ``CONV_blocked`` (``conv_blocked``): then its
    patches are returned."""
    w.reads(*GEMM_KNOBS)
    patches = blocked_patches(mm, buffers)
    if patches is not None:
        w("#ifdef CONV_blocked")
        alloc_blocked(w, mm, patches, tag)
        lead = _open_batches(w, buffers, mm)
        emit_blocked(w, buffers, names, mm, patches, lead)
        emit_epilogue(w, buffers, names, mm, writes, lead)
        close_blocked(w)
        w.close()  # bt
        w.close()  # parallel
        w("#else")
    _emit_packed(w, buffers, mm, writes, names, tag)
    if patches is not None:
        w("#endif")
    return patches


def _open_batches(w: Writer, buffers: dict[int, str], mm: Matmul) -> tuple[str, ...]:
    """The parallel region and the loop over the product's batch, C's block of it at ``cb``; the batch
    index as ``mm.b`` is read (a dim of size 1 at 0)."""
    *batch, m, n = mm.shape
    w("#pragma omp parallel num_threads(nt)")
    w.open("")
    w.open(f"for (int64_t bt = 0; bt < {math.prod(batch)}; ++bt)")
    decompose(w, mm.shape, list(range(len(batch))), "bt")
    w(f"float* restrict cb = {buffers[id(mm)]} + bt * {m * n};")
    return tuple("0" if s == 1 else f"i{d}" for d, s in enumerate(batch))


def emit_epilogue(
    w: Writer, buffers: dict[int, str], names: Iterator[int], mm: Matmul, writes: list[Node], lead: tuple[str, ...]
) -> None:
    """The writes that read the product at their own position, over the tile just finished: rows
    ``[ti, ti + mr)``, columns ``[tj, tj + nr)`` of C."""
    if not writes:
        return
    w.open("for (int64_t i = ti; i < ti + mr; ++i)")
    w.pragma(LOOP)
    w.open("for (int64_t j = tj; j < tj + nr; ++j)")
    body = Body(buffers, names=names)
    idx = (*lead, "i", "j")
    at = {shape: _reshaped(body, idx, mm.shape, shape) for shape in dict.fromkeys(out.shape for out in writes)}
    values = [body.value_of(out, at[out.shape]) for out in writes]
    w.body(body)
    for out, v in zip(writes, values, strict=True):  # a reshape keeps the linear order: C's position
        w(f"{buffers[id(out)]}[{linear(idx, mm.shape)}] = {v};")
    w.close()
    w.close()


def _emit_packed(
    w: Writer, buffers: dict[int, str], mm: Matmul, writes: list[Node], names: Iterator[int], tag: str
) -> None:
    """BLIS's packed loop nest (the module docstring)."""
    n = mm.shape[-1]
    k = mm.a.shape[-1]
    m = mm.shape[-2]
    once = prepackable(mm)  # B packed once, not per call: under PREPACK (packing.emit_prepack)
    if once:
        w.reads("PREPACK")
        w("#if PREPACK")
        emit_prepack(w, buffers, names, mm, tag)
        w("#endif")
    w(f"static float* {tag}_bs; static size_t {tag}_bh; static float* {tag}_as; static size_t {tag}_ah;")
    # A packed whole, once, rather than again for each NC-wide block of B (a large N: an LM head's vocabulary)
    w(f"const int a_whole = {n} > NC && {n} > NR && (int64_t)KILN_PAD({m}) * {k} <= KILN_A_WHOLE;")
    w(f"float* bp = kiln_grow(&{tag}_bs, &{tag}_bh, (size_t)KC * KILN_NCP);")
    w(f"float* ap = kiln_grow(&{tag}_as, &{tag}_ah, a_whole ? (size_t)KILN_PAD({m}) * {k} : (size_t)KC * KILN_MCP);")
    w("if (!bp || !ap) abort();")
    lead = _open_batches(w, buffers, mm)
    w.open("if (a_whole)")
    w.open(f"for (int64_t pc = 0; pc < {k}; pc += KC)")
    w(f"const int64_t kc = KILN_MIN((int64_t)KC, {k} - pc);")
    w.open(f"for (int64_t ib = 0; ib < {m}; ib += KILN_MCP)")
    w(f"const int64_t ie = KILN_MIN(ib + KILN_MCP, (int64_t){m});")
    w(f"float* restrict apb = ap + pc * KILN_PAD({m}) + ib * kc;")
    _pack_a(w, buffers, names, mm, lead, "apb")
    w.close()
    w.close()
    w.close()
    open_b_blocks(w, n, k)
    # B's block in NR-wide slivers bp[js][p][r], then per block of MC rows A's MR-tall slivers ap[is][p][r],
    # packed just before the block is used (it stays in L2); each read along its contiguous dim.
    if once:
        w("#if PREPACK")
        w(f"const float* bq = {tag}_bf + {PREPACKED_AT.format(k=k)};")
        w("#else")
    pack_b(w, buffers, names, mm, lead)
    w("const float* bq = bp;")
    if once:
        w("#endif")
    w.open(f"for (int64_t ib = 0; ib < {m}; ib += KILN_MCP)")  # blocks of MC rows rounded up to MR
    w(f"const int64_t ie = KILN_MIN(ib + KILN_MCP, (int64_t){m});")
    w(f"float* restrict apb = a_whole ? ap + pc * KILN_PAD({m}) + ib * kc : ap;")
    rows = _stored_rows(mm, buffers)
    if rows is not None:  # N <= NR: each element of A feeds one tile, so packing it costs more than it saves
        w(f"#if {n} > NR")
    w.open("if (!a_whole)")
    _pack_a(w, buffers, names, mm, lead, "apb")
    w.close()
    if rows is not None:
        w("#endif")
    # the threads share out the block's tiles in (sliver of B, sliver of A) order: with many of B's slivers
    # a thread takes whole ones (each stays in L1 across the block's A slivers); with few (a skinny product,
    # N <= NR: one sliver) they split the rows, which sharing out B's slivers alone left to one thread
    w("#pragma omp for collapse(2) schedule(static)")
    w.open("for (int64_t js = 0; js < ns; ++js)")
    w.open("for (int64_t ti = ib; ti < ie; ti += MR)")
    w("const int64_t tj = jc + js * NR, nr = KILN_MIN((int64_t)NR, jc + nc - tj);")
    w("const int64_t mr = KILN_MIN((int64_t)MR, ie - ti);")
    if rows is not None:  # the tile's rows of A where they lie (a row past the last reads the last: discarded)
        w(f"#if {n} <= NR")
        w("const float* ar[MR];")
        last = f"(int64_t){m - 1}"
        w(f"for (int r = 0; r < MR; ++r) ar[r] = {rows} + bt * {m * k} + KILN_MIN(ti + r, {last}) * {k} + pc;")
        w("#define KILN_A_TILE ar")
        w("#define KILN_MICRO kiln_micro_rows")
        w("#else")
    w("#define KILN_A_TILE (apb + (ti - ib) * kc)")
    w("#define KILN_MICRO kiln_micro")
    if rows is not None:
        w("#endif")
    # this tile's share of the next sliver's lines (only prefetched: never read, so past the end is harmless)
    w("const int64_t tiles = (ie - ib + MR - 1) / MR, all = (kc * NR + 15) / 16, share = (all + tiles - 1) / tiles;")
    w("const int64_t lines = KILN_MIN(share, all - (ti - ib) / MR * share);")
    w("const float* next = bq + (js + 1) * kc * NR + (ti - ib) / MR * share * 16;")
    w(f"KILN_PREFETCH_C(cb + (ti + MR) * {n} + tj, {n});")
    w.open("if (mr == MR && nr == NR)")
    w(f"KILN_MICRO(kc, KILN_A_TILE, bq + js * kc * NR, cb + ti * {n} + tj, {n}, pc > 0, next, lines);")
    w.close("} else {")
    w.depth += 1
    w("float tile[MR * NR] __attribute__((aligned(64)));")
    w("KILN_MICRO(kc, KILN_A_TILE, bq + js * kc * NR, tile, NR, 0, next, lines);")
    w.open("for (int64_t i = 0; i < mr; ++i)")
    w.open("for (int64_t j = 0; j < nr; ++j)")
    w(f"float* dst = cb + (ti + i) * {n} + tj + j;")
    w("*dst = (pc > 0 ? *dst : 0.0f) + tile[i * NR + j];")
    w.close()
    w.close()
    w.close()
    if writes:
        w.open(f"if (pc + kc == {k})")
        emit_epilogue(w, buffers, names, mm, writes, lead)
        w.close()
    w("#undef KILN_A_TILE")
    w("#undef KILN_MICRO")
    w.close()  # ti
    w.close()  # js
    w.close()  # ib
    w.close()  # pc
    w.close()  # jc
    w.close()  # bt
    w.close()  # parallel


def _pack_a(
    w: Writer, buffers: dict[int, str], names: Iterator[int], mm: Matmul, lead: tuple[str, ...], into: str
) -> None:
    """Pack rows ``[ib, ie)`` of A's block at ``pc`` (``kc`` deep) into MR-tall slivers ``into[is][p][r]``."""
    pack(
        w,
        buffers,
        names,
        mm.a,
        (*lead, "i", "pc + p"),
        "is",
        "(ie - ib + MR - 1) / MR",
        "MR",
        "i = ib + is * MR + r",
        "i < ie",
        f"{into}[(is * kc + p) * MR + r]",
    )


def _stored_rows(mm: Matmul, buffers: dict[int, str]) -> str | None:
    """The buffer holding A as (batch, M, K) row-major, the product's own batch (through reshapes), or None."""
    return stored(mm.a, buffers) if mm.a.ctype == "float" else None


def _reshaped(body: Body, idx: tuple[str, ...], product: tuple[int, ...], shape: tuple[int, ...]) -> tuple[str, ...]:
    """The index in ``shape`` (the product reshaped) of the product's element at ``idx``. Where ``shape``'s
    trailing dims hold exactly the product's columns (a convolution's (OH, OW)), the row and the column are
    unflattened apart, so what reads only the row (a per-channel bias) does not change along a tile's row."""
    if shape == product:
        return idx
    for k in range(len(shape) + 1):
        if math.prod(shape[k:]) == product[-1]:
            return _unflatten(body, linear(idx[:-1], product[:-1]), shape[:k]) + _unflatten(body, idx[-1], shape[k:])
    return _unflatten(body, linear(idx, product), shape)


def _unflatten(body: Body, flat: str, shape: tuple[int, ...]) -> tuple[str, ...]:
    """The index in ``shape`` of the linear position ``flat`` (an epilogue that reads the product reshaped).

    Written as ``linear`` rejoins it (``((p)/c)*c + ((p)%c)`` is ``(p)``), and the outermost dim without a
    modulo (``flat`` is inside ``shape``): read back through a reshape, the product's element is at ``flat``.
    """
    position = body.temp("int64_t", flat)
    strides = contiguous_strides(shape)
    outer = next((d for d, size in enumerate(shape) if size != 1), None)
    return tuple(
        "0"
        if size == 1
        else f"({position})/{stride}"
        if d == outer
        else f"(({position})/{stride})%{size}"
        if stride > 1
        else f"({position})%{size}"
        for d, (size, stride) in enumerate(zip(shape, strides, strict=True))
    )
