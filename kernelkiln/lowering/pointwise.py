"""C expressions of the pointwise operations, per element type."""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from kernelkiln.lowering.graph import FLOATS, Unsupported
from kernelkiln.lowering.vmath import VMATH_FUNCTIONS

# One-argument math: the C function (float variants take an 'f' suffix).
_MATH = {
    "exp": "exp",
    "exp2": "exp2",
    "expm1": "expm1",
    "log": "log",
    "log2": "log2",
    "log10": "log10",
    "log1p": "log1p",
    "sqrt": "sqrt",
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "tanh": "tanh",
    "asin": "asin",
    "acos": "acos",
    "atan": "atan",
    "sinh": "sinh",
    "cosh": "cosh",
    "asinh": "asinh",
    "acosh": "acosh",
    "atanh": "atanh",
    "erf": "erf",
    "erfc": "erfc",
    "floor": "floor",
    "ceil": "ceil",
    "trunc": "trunc",
    "round": "rint",
    "abs": "fabs",
}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_LOGICAL = {"logical_and": "&&", "logical_or": "||", "logical_xor": "!="}


def literal(value: float | int | bool, ctype: str) -> str:
    """``value`` as an exact C literal of ``ctype``."""
    if ctype in FLOATS:
        value = float(value)
        if math.isnan(value):
            return "NAN"
        if math.isinf(value):
            return "INFINITY" if value > 0 else "(-INFINITY)"
        text = value.hex()
        return f"(({ctype}){text})"
    if isinstance(value, float) and not value.is_integer():
        raise Unsupported(f"a fractional value {value} in integer arithmetic")
    return f"(({ctype}){int(value)})"


_INLINED: ContextVar[set[str] | None] = ContextVar("inlined", default=None)  # filled by render_calling


def _fn(name: str, ctype: str) -> str:
    """The C function ``name`` for ``ctype``: float takes the 'f' variant, or VMATH's inline one where it has it."""
    if ctype != "float":
        return name
    inlined = _INLINED.get()
    if inlined is not None and name in VMATH_FUNCTIONS:
        inlined.add(name)
    return VMATH_FUNCTIONS.get(name, f"{name}f")


def render_calling(op: str, args: list[str], ctype: str, params: tuple[Any, ...]) -> tuple[str, frozenset[str]]:
    """``render``'s expression, and the VMATH functions it calls (its handlers name them as they write them)."""
    inlined: set[str] = set()
    token = _INLINED.set(inlined)
    try:
        return render(op, args, ctype, params), frozenset(inlined)
    finally:
        _INLINED.reset(token)


def render(op: str, args: list[str], ctype: str, params: tuple[Any, ...]) -> str:
    """The C expression of ``op`` over ``args`` (already cast to the compute type ``ctype``)."""
    handler = _OPS.get(op)
    if handler is not None:
        return handler(args, ctype, params)
    if op in _MATH:
        if ctype not in FLOATS and op == "abs":
            return f"({args[0]} < 0 ? -{args[0]} : {args[0]})"
        return f"{_fn(_MATH[op], ctype)}({args[0]})"
    if op in _COMPARE:
        return f"({args[0]} {_COMPARE[op]} {args[1]})"
    if op in _LOGICAL:
        return f"((_Bool)({args[0]}) {_LOGICAL[op]} (_Bool)({args[1]}))"
    raise Unsupported(f"pointwise op {op}")


def _scale(x: str, factor: float, ctype: str) -> str:
    return x if factor == 1 else f"{literal(factor, ctype)} * {x}"


def _clamp(args: list[str], ctype: str, bounds: tuple[Any, ...]) -> str:
    x = args[0]
    low, high = bounds
    if low is not None:
        x = f"({x} < {low} ? {low} : {x})"
    if high is not None:
        x = f"({x} > {high} ? {high} : {x})"
    return x


def _bounds(args: list[str], ctype: str, params: tuple[Any, ...]) -> tuple[Any, ...]:
    """clamp's bounds: scalars in params, tensors as extra args (None where absent)."""
    lo, hi = params
    rest = iter(args[1:])
    low = next(rest) if lo == "tensor" else (None if lo is None else literal(lo, ctype))
    high = next(rest) if hi == "tensor" else (None if hi is None else literal(hi, ctype))
    return low, high


def _pow(args: list[str], ctype: str, params: tuple[Any, ...]) -> str:
    x = args[0]
    if not params:
        return f"{_fn('pow', ctype)}({x}, {args[1]})"
    e = params[0]
    simple = {
        1.0: x,
        2.0: f"({x} * {x})",
        3.0: f"({x} * {x} * {x})",
        0.5: f"{_fn('sqrt', ctype)}({x})",
        -1.0: f"({literal(1, ctype)} / {x})",
        0.0: literal(1, ctype),
    }
    if float(e) in simple and ctype in FLOATS:
        return simple[float(e)]
    return f"{_fn('pow', ctype)}({x}, {literal(e, ctype)})"


def _gelu(args: list[str], ctype: str, params: tuple[Any, ...]) -> str:
    x = args[0]
    if params and params[0] == "tanh":
        inner = f"{literal(math.sqrt(2 / math.pi), ctype)} * ({x} + {literal(0.044715, ctype)} * {x} * {x} * {x})"
        return f"({literal(0.5, ctype)} * {x} * ({literal(1, ctype)} + {_fn('tanh', ctype)}({inner})))"
    return (
        f"({literal(0.5, ctype)} * {x} * ({literal(1, ctype)} + "
        f"{_fn('erf', ctype)}({x} * {literal(math.sqrt(0.5), ctype)})))"
    )


def _elu(args: list[str], ctype: str, params: tuple[Any, ...]) -> str:
    alpha, scale, input_scale = params
    x = args[0]
    negative = _scale(f"{_fn('expm1', ctype)}({_scale(x, input_scale, ctype)})", alpha * scale, ctype)
    return f"({x} > 0 ? {_scale(x, scale, ctype)} : {negative})"


def _maximum(args: list[str], ctype: str, params: tuple[Any, ...]) -> str:
    a, b = args
    return f"(({a} > {b} || {a} != {a}) ? {a} : {b})"


def _minimum(args: list[str], ctype: str, params: tuple[Any, ...]) -> str:
    a, b = args
    return f"(({a} < {b} || {a} != {a}) ? {a} : {b})"


def _div(args: list[str], ctype: str, params: tuple[Any, ...]) -> str:
    mode = params[0] if params else None
    if mode is None:
        return f"({args[0]} / {args[1]})"
    if ctype not in FLOATS:
        raise Unsupported(f"integer division with rounding_mode={mode}")
    return f"{_fn('floor' if mode == 'floor' else 'trunc', ctype)}({args[0]} / {args[1]})"


_OPS: dict[str, Callable[[list[str], str, tuple[Any, ...]], str]] = {
    "identity": lambda a, t, p: a[0],
    "store": lambda a, t, p: a[0],  # identity, stored by the schedule: a copy the lowering asks for
    "cast": lambda a, t, p: f"(({t})({a[0]}))",
    "add": lambda a, t, p: f"({a[0]} + {_scale(a[1], p[0] if p else 1, t)})",
    "sub": lambda a, t, p: f"({a[0]} - {_scale(a[1], p[0] if p else 1, t)})",
    "rsub": lambda a, t, p: f"({a[1]} - {_scale(a[0], p[0] if p else 1, t)})",
    "mul": lambda a, t, p: f"({a[0]} * {a[1]})",
    "div": _div,
    "neg": lambda a, t, p: f"(-{a[0]})",
    "reciprocal": lambda a, t, p: f"({literal(1, t)} / {a[0]})",
    "rsqrt": lambda a, t, p: f"({literal(1, t)} / {_fn('sqrt', t)}({a[0]}))",
    "sigmoid": lambda a, t, p: f"({literal(1, t)} / ({literal(1, t)} + {_fn('exp', t)}(-{a[0]})))",
    "relu": lambda a, t, p: f"({a[0]} < 0 ? {literal(0, t)} : {a[0]})",
    "sign": lambda a, t, p: f"(({t})(({a[0]} > 0) - ({a[0]} < 0)))",
    "frac": lambda a, t, p: f"({a[0]} - {_fn('trunc', t)}({a[0]}))",
    "pow": _pow,
    "gelu": _gelu,
    "elu": _elu,
    "leaky_relu": lambda a, t, p: f"({a[0]} > 0 ? {a[0]} : {a[0]} * {literal(p[0], t)})",
    "hardtanh": lambda a, t, p: _clamp(a, t, (literal(p[0], t), literal(p[1], t))),
    "clamp": lambda a, t, p: _clamp(a, t, _bounds(a, t, p)),
    "threshold": lambda a, t, p: f"({a[0]} > {literal(p[0], t)} ? {a[0]} : {literal(p[1], t)})",
    "maximum": _maximum,
    "minimum": _minimum,
    "where": lambda a, t, p: f"({a[0]} ? {a[1]} : {a[2]})",
    "logical_not": lambda a, t, p: f"(!({a[0]}))",
    "bitwise_not": lambda a, t, p: f"(~({a[0]}))",  # integers only (aten_ops: a bool's is logical_not)
    "isnan": lambda a, t, p: f"({a[0]} != {a[0]})",
    "fmod": lambda a, t, p: f"{_fn('fmod', t)}({a[0]}, {a[1]})",
    "atan2": lambda a, t, p: f"{_fn('atan2', t)}({a[0]}, {a[1]})",
}

# Ops whose result type differs from their arguments' compute type.
BOOLEAN = frozenset({*_COMPARE, *_LOGICAL, "logical_not", "isnan"})
SUPPORTED = frozenset({*_OPS, *_MATH, *_COMPARE, *_LOGICAL})
