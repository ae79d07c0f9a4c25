"""Shared pieces of the C emitters: the header of knob macros, loops, indices, accumulators."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernelkiln.lowering.body import Body

PARALLEL_MIN = 1 << 15  # elements below which a loop runs on one thread: forking costs more
INIT = {"sum": "0", "prod": "1", "max": "-INFINITY", "min": "INFINITY", "argmax": "-INFINITY", "argmin": "INFINITY"}
OMP = {"sum": "+", "prod": "*", "max": "max", "min": "min"}
HEADER = r"""#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#ifndef ACC
#define ACC 1
#endif
#ifndef UNROLL
#define UNROLL 1
#endif
#ifndef VEC
#define VEC 0
#endif
#ifndef TILE
#define TILE 256
#endif
#define KILN_STR(x) #x
#define KILN_PRAGMA(x) _Pragma(KILN_STR(x))
#if VEC > 0
#define KILN_SIMD KILN_PRAGMA(omp simd simdlen(VEC))
#define KILN_SIMD_REDUCE(op, v) KILN_PRAGMA(omp simd simdlen(VEC) reduction(op:v))
#else
#define KILN_SIMD KILN_PRAGMA(omp simd)
#define KILN_SIMD_REDUCE(op, v) KILN_PRAGMA(omp simd reduction(op:v))
#endif
#define KILN_UNROLL KILN_PRAGMA(GCC unroll UNROLL)
/* GCC takes either omp simd or its own unroll on a loop, not both: UNROLL > 1 trades the simd length for unrolling */
#if UNROLL > 1
#define KILN_LOOP KILN_PRAGMA(GCC ivdep) KILN_PRAGMA(GCC unroll UNROLL)
#else
#define KILN_LOOP KILN_SIMD
#endif
#define KILN_MIN(a, b) ((a) < (b) ? (a) : (b))
"""


def combine(op: str, acc: str, v: str) -> str:
    return {
        "sum": f"{acc} + {v}",
        "prod": f"{acc} * {v}",
        "max": f"({v} > {acc} || {v} != {v} ? {v} : {acc})",
        "min": f"({v} < {acc} || {v} != {v} ? {v} : {acc})",
    }[op]


@dataclass(frozen=True)
class Pragma:
    """A loop pragma the header defines, and the knobs its definition reads."""

    text: str
    knobs: tuple[str, ...]


LOOP = Pragma("KILN_LOOP", ("UNROLL", "VEC"))
SIMD = Pragma("KILN_SIMD", ("VEC",))
UNROLL = Pragma("KILN_UNROLL", ("UNROLL",))


def simd_reduce(op: str, into: str) -> Pragma:
    """The simd pragma of a reduction by ``op`` into ``into``."""
    return Pragma(f"KILN_SIMD_REDUCE({op}, {into})", ("VEC",))


class Writer:
    """Lines with indentation, and the knobs they read (each emitter says which as it writes them)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1
        self.knobs: set[str] = set()

    def __call__(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def reads(self, *knobs: str) -> None:
        """The code being written reads ``knobs`` (macros a tuner sets)."""
        self.knobs.update(knobs)

    def pragma(self, pragma: Pragma) -> None:
        self(pragma.text)
        self.reads(*pragma.knobs)

    def open(self, text: str) -> None:
        self(text + " {")
        self.depth += 1

    def close(self, text: str = "}") -> None:
        self.depth -= 1
        self(text)

    def body(self, body: Body) -> None:
        for line in body.lines:
            self(line)
        self.reads(*body.knobs)


def var(shape: tuple[int, ...], k: int) -> str:
    return "0" if shape[k] == 1 else f"i{k}"


def decompose(w: Writer, shape: tuple[int, ...], dims: list[int], flat: str) -> None:
    """Declare ``i{k}`` for ``dims`` (outer to inner) from the flat index ``flat``."""
    live = [k for k in dims if shape[k] != 1]
    inner = 1
    for k in reversed(live):
        expr = flat if inner == 1 else f"{flat} / {inner}"
        w(f"const int64_t i{k} = {expr if k == live[0] else f'({expr}) % {shape[k]}'};")
        inner *= shape[k]


FLAT = "iq"  # the position along a run of trailing dims walked as one (``split_index``)


def split_index(shape: tuple[int, ...], run: list[int], flat: str) -> dict[int, str]:
    """Each dim of ``run`` (trailing dims, outer to inner) as the C expression of its index at position ``flat``
    along them, written so that ``linear`` of a tensor laid out as ``shape`` rejoins them into ``(flat)``."""
    at: dict[int, str] = {}
    rest = flat
    for j, d in enumerate(run):
        below = math.prod(shape[e] for e in run[j + 1 :])
        if below == 1:
            at[d] = rest
        else:
            at[d], rest = f"({rest})/{below}", f"({rest})%{below}"
    return at


def open_loops(w: Writer, shape: tuple[int, ...], dims: list[int], innermost: Pragma | str | None = None) -> int:
    """Open a loop per dim of ``dims`` with size > 1; ``innermost`` pragma(s) on the last (a ``Pragma``, or
    an OpenMP line that reads no knob). Returns loops opened."""
    live = [k for k in dims if shape[k] != 1]
    for position, k in enumerate(live):
        if position == len(live) - 1 and innermost:
            w.pragma(innermost) if isinstance(innermost, Pragma) else w(innermost)
        w.open(f"for (int64_t i{k} = 0; i{k} < {shape[k]}; ++i{k})")
    return len(live)


def flat_position(shape: tuple[int, ...], live: list[int]) -> str:
    """The position among the reduced ``live`` dims (row-major), as argmax/argmin report it."""
    return " + ".join(f"i{d}*{math.prod(shape[e] for e in live if e > d)}" for d in live) or "0"


def parallel(work: int, extra: str = "") -> str | None:
    return f"#pragma omp parallel for num_threads(nt) schedule(static){extra}" if work >= PARALLEL_MIN else None
