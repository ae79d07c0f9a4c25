"""Parse C-like function signatures such as ``"void(const float*, float*, int64_t)"``.

Pointer parameters take contiguous tensors of the matching dtype, on the CPU for C/C++
and on a CUDA device for CUDA launchers (``tensor_pointer`` checks this); scalar
parameters take Python numbers. The parsed form tells the loader which ctypes to
declare and which conversion to apply per argument.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["DEVICES", "MAX_PARAMS", "Param", "Signature", "SignatureError", "parse_signature", "tensor_pointer"]


class SignatureError(ValueError):
    """A signature string the loader cannot express."""


# Pointer element type -> tensor dtypes it accepts.
POINTER_DTYPES: dict[str, tuple[torch.dtype, ...]] = {
    "float": (torch.float32,),
    "double": (torch.float64,),
    "int8_t": (torch.int8,),
    "uint8_t": (torch.uint8, torch.bool),
    "int16_t": (torch.int16,),
    "uint16_t": (torch.float16, torch.bfloat16),  # raw storage of 16-bit floats
    "int32_t": (torch.int32,),
    "int64_t": (torch.int64,),
}

# Scalar type -> (ctypes type, kind, inclusive range for integers).
SCALARS: dict[str, tuple[type, str, tuple[int, int] | None]] = {
    "int": (ctypes.c_int, "int", (-(2**31), 2**31 - 1)),
    "int32_t": (ctypes.c_int32, "int", (-(2**31), 2**31 - 1)),
    "long": (
        ctypes.c_long,
        "int",
        (-(2 ** (ctypes.sizeof(ctypes.c_long) * 8 - 1)), 2 ** (ctypes.sizeof(ctypes.c_long) * 8 - 1) - 1),
    ),
    "int64_t": (ctypes.c_int64, "int", (-(2**63), 2**63 - 1)),
    "size_t": (ctypes.c_size_t, "int", (0, 2 ** (ctypes.sizeof(ctypes.c_size_t) * 8) - 1)),
    "float": (ctypes.c_float, "float", None),
    "double": (ctypes.c_double, "float", None),
}

# ctypes refuses a function declared with more parameters than this (CTYPES_MAX_ARGCOUNT)
MAX_PARAMS = 1024

# Device type pointer arguments must live on, per source language.
DEVICES = {"c": "cpu", "c++": "cpu", "cuda": "cuda"}

RETURNS: dict[str, type | None] = {
    "void": None,
    "int": ctypes.c_int,
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
}

_SIGNATURE = re.compile(r"^\s*(?P<ret>[A-Za-z_][\w\s]*?)\s*\((?P<params>[^()]*)\)\s*$")
_QUALIFIERS = frozenset({"const", "restrict", "__restrict", "__restrict__"})
_IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class Param:
    """One parameter: its C base type, whether it is a pointer, and its display text."""

    base: str
    pointer: bool
    text: str

    @property
    def ctype(self) -> type:
        return ctypes.c_void_p if self.pointer else SCALARS[self.base][0]


@dataclass(frozen=True)
class Signature:
    """A parsed signature: return type name and parameters in order."""

    returns: str
    params: tuple[Param, ...]
    text: str

    @property
    def restype(self) -> type | None:
        return RETURNS[self.returns]


def parse_signature(text: str) -> Signature:
    """Parse ``text`` or raise ``SignatureError`` saying what is unsupported."""
    if not isinstance(text, str):
        raise SignatureError(f"signature must be a string, got {type(text).__name__}")
    match = _SIGNATURE.match(text)
    if match is None:
        raise SignatureError(f"cannot parse signature {text!r}; expected e.g. 'void(const float*, float*, int64_t)'")
    returns = " ".join(match["ret"].split())
    if returns not in RETURNS:
        raise SignatureError(f"unsupported return type {returns!r} in {text!r}; supported: {', '.join(RETURNS)}")
    raw = match["params"].strip()
    pieces = [] if raw in ("", "void") else [p.strip() for p in raw.split(",")]
    if len(pieces) > MAX_PARAMS:
        raise SignatureError(
            f"a signature with {len(pieces)} parameters: ctypes calls at most {MAX_PARAMS} (pass buffers "
            "through one pointer, as an arena)"
        )
    return Signature(returns, tuple(_param(p, text) for p in pieces), text)


def _param(piece: str, text: str) -> Param:
    tokens = piece.replace("*", " * ").split()
    const = "const" in tokens
    stars = tokens.count("*")
    words = [t for t in tokens if t not in _QUALIFIERS and t != "*"]
    # One type word, optionally followed by a parameter name.
    if not 1 <= len(words) <= 2 or stars > 1 or not all(_IDENT.fullmatch(w) for w in words):
        raise SignatureError(f"cannot parse parameter {piece!r} in {text!r}")
    base, pointer = words[0], stars == 1
    if pointer and base not in POINTER_DTYPES:
        raise SignatureError(
            f"unsupported pointer type {base}* in {text!r}; supported: {', '.join(t + '*' for t in POINTER_DTYPES)}"
        )
    if not pointer and base not in SCALARS:
        raise SignatureError(
            f"unsupported parameter type {base!r} in {text!r}; supported scalars: {', '.join(SCALARS)}"
        )
    return Param(base, pointer, f"{'const ' if const else ''}{base}{'*' if pointer else ''}")


def tensor_pointer(value: Any, dtypes: tuple[torch.dtype, ...], device: str, where: str) -> int:
    """``value.data_ptr()`` once ``value`` is a contiguous tensor of ``dtypes`` on ``device``.

    Raises ``TypeError`` naming ``where`` (the function and argument) otherwise: a
    CUDA launcher handed a CPU tensor would pass a host pointer to the GPU.
    """
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{where}: expected a tensor, got {type(value).__name__}")
    if value.dtype not in dtypes:
        expected = " or ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise TypeError(f"{where}: expected dtype {expected}, got {str(value.dtype).removeprefix('torch.')}")
    if (not value.is_cpu) if device == "cpu" else value.device.type != device:  # is_cpu: no device object
        if device == "cuda":
            raise TypeError(
                f"{where}: expected a CUDA tensor (CUDA kernels take device pointers), "
                f"got device {value.device}; move it with .cuda()"
            )
        raise TypeError(f"{where}: expected a CPU tensor, got device {value.device}")
    if device == "cuda" and value.device.index not in (None, torch.cuda.current_device()):
        # The launcher runs on the thread's current device, not on the tensor's.
        raise TypeError(
            f"{where}: tensor is on {value.device} but the current device is "
            f"cuda:{torch.cuda.current_device()} (use torch.cuda.device(...))"
        )
    if not value.is_contiguous():
        raise TypeError(f"{where}: tensor must be contiguous (call .contiguous())")
    return value.data_ptr()
