"""Scratch buffers passed as one arena, for a function that would otherwise take more parameters than ctypes
calls (``native.signature.MAX_PARAMS``): a DenseNet-201 stores two scratch buffers per layer in each CONV form.

The arena is one byte buffer; each scratch buffer is a pointer into it at a 64-byte aligned offset, declared at
the top of the form that uses it. The CONV forms are alternatives (``#ifdef``), so each starts at offset 0 and
the arena is as large as the larger one. Functions under the limit keep one parameter per buffer, so their
sources do not change.
"""

from __future__ import annotations

from kernelkiln.lowering.graph import Node

ARENA = "scratch"
_ALIGN = 64
_BYTES = {"float": 4, "double": 8, "int64_t": 8, "int32_t": 4, "uint8_t": 1}


def arena_views(temps: list[tuple[int, Node]], buffers: dict[int, str]) -> tuple[str, int]:
    """The declarations pointing ``temps``' buffers into the arena, and the bytes they take."""
    lines, offset = [], 0
    for _, t in temps:
        name = buffers[id(t)]
        lines.append(
            f"{t.ctype}* restrict {name} = ({t.ctype}*)__builtin_assume_aligned({ARENA} + {offset}, {_ALIGN});"
        )
        offset += -(-t.numel * _BYTES[t.ctype] // _ALIGN) * _ALIGN
    return "\n".join(lines), offset
