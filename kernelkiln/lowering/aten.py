"""ATen operations → the lowering's graph.

The handlers build composite operations (softmax, the normalizations, norms, losses
that ATen keeps whole) from pointwise nodes and reductions, so every family lowers
through the same few kernel shapes. ``HANDLERS`` is the list of what lowers; anything
else is named in the refusal.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kernelkiln.lowering import views as V
from kernelkiln.lowering.graph import (
    CTYPES,
    FLOATS,
    Constant,
    Node,
    Pointwise,
    Reduce,
    Unsupported,
)
from kernelkiln.lowering.pointwise import BOOLEAN


class Unusable:
    """A result the lowering does not produce (max pooling's indices); reading it is refused."""

    def __init__(self, what: str):
        self.what = what


def ctype_of(dtype: Any) -> str:
    name = str(dtype).removeprefix("torch.")
    if name not in CTYPES:
        raise Unsupported(f"dtype {name} (the lowering handles float32, float64, int32, int64 and bool)")
    return CTYPES[name]


def node(value: Any, ctype: str = "float") -> Node:
    """A graph node for a tensor node or a Python number (a constant)."""
    if isinstance(value, Node):
        return value
    if isinstance(value, Unusable):
        raise Unsupported(value.what)
    if isinstance(value, bool):
        return Constant((), "uint8_t", value=value)
    if isinstance(value, (int, float)):
        return Constant((), ctype if isinstance(value, int) or ctype in FLOATS else "float", value=value)
    raise Unsupported(f"an argument of type {type(value).__name__}")


def pointwise(
    op: str, args: list[Any], ctype: str, params: tuple[Any, ...] = (), shape: tuple[int, ...] | None = None
) -> Node:
    """``op`` over ``args`` broadcast together; compute type ``ctype`` (comparisons give bool)."""
    nodes = [node(a, ctype) for a in args]
    if shape is None:
        shape = broadcast_shape(*(n.shape for n in nodes))
    out = "uint8_t" if op in BOOLEAN else ctype
    return Pointwise(tuple(shape), out, op=op, args=tuple(V.broadcast(n, shape) for n in nodes), params=params)


def broadcast_shape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(rank):
        sizes = {s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0} - {1}
        if len(sizes) > 1:
            raise Unsupported(f"shapes {shapes} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def reduce(op: str, x: Node, dims: Any, keepdim: bool, ctype: str | None = None) -> Node:
    """``x`` reduced over ``dims`` (None or [] for all); mean divides the sum."""
    rank = len(x.shape)
    if dims is None or (isinstance(dims, (list, tuple)) and not dims) or not rank:
        dims = tuple(range(rank))  # None or []: every dim (an int 0 is dim 0)
    else:
        dims = tuple(sorted({d % rank for d in ([dims] if isinstance(dims, int) else dims)}))
    if rank == 0:
        return x
    kept = tuple(1 if k in dims else s for k, s in enumerate(x.shape))
    if op == "mean":
        count = math.prod(x.shape[d] for d in dims)
        out = Reduce(kept, ctype or x.ctype, op="sum", arg=x, dims=dims, scale=1.0 / count if count else math.nan)
    else:
        result = "int64_t" if op in ("argmax", "argmin") else (ctype or x.ctype)
        out = Reduce(kept, result, op=op, arg=x, dims=dims)
    return out if keepdim else V.reshape(out, tuple(s for k, s in enumerate(x.shape) if k not in dims))


def moments(x: Node, dims: tuple[int, ...], correction: float = 0.0) -> tuple[Node, Node]:
    """(mean, variance) over ``dims``, both keeping the dims; the variance from the deviations (two passes)."""
    mean = reduce("mean", x, dims, True)
    deviation = pointwise("sub", [x, mean], x.ctype)
    count = math.prod(x.shape[d] for d in dims) if x.shape else 1
    squares = reduce("sum", pointwise("mul", [deviation, deviation], x.ctype), dims, True)
    return mean, pointwise("div", [squares, float(max(count - correction, 0))], x.ctype)


# What a handler returns: one value, or one per output of the op (an unusable one refused only if read).
Lowered = Node | tuple[Node | Unusable, ...]
Handler = Callable[[list[Any], dict[str, Any], Any], Lowered]
HANDLERS: dict[str, Handler] = {}


def handles(*names: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for name in names:
            HANDLERS[name] = fn
        return fn

    return register
