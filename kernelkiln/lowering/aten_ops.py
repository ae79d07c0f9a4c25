"""Handlers for ATen's pointwise, view, factory and reduction operations."""

from __future__ import annotations

from typing import Any, cast

from kernelkiln.lowering import views as V
from kernelkiln.lowering.aten import Handler, Lowered, ctype_of, handles, node, pointwise, reduce
from kernelkiln.lowering.graph import Concat, Constant, Gather, Node, Unsupported

_UNARY = (
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "rsqrt",
    "sin",
    "cos",
    "tan",
    "tanh",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "erf",
    "erfc",
    "floor",
    "ceil",
    "trunc",
    "round",
    "abs",
    "neg",
    "reciprocal",
    "sigmoid",
    "relu",
    "sign",
    "frac",
    "logical_not",
    "isnan",
)
_BINARY = (
    "mul",
    "div",
    "maximum",
    "minimum",
    "fmod",
    "atan2",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_xor",
)


def _out(meta: Any) -> tuple[tuple[int, ...], str]:
    return tuple(int(s) for s in meta.shape), ctype_of(meta.dtype)


def _pointwise(op: str) -> Handler:
    def handler(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
        shape, ctype = _out(meta)
        # a comparison's compare type is its arguments' (Body._compute_type); its node is bool
        return pointwise(op, list(args[:2] if op in _BINARY else args[:1]), ctype, shape=shape)

    return handler


for _name in _UNARY + _BINARY:
    handles(_name)(_pointwise(_name))


def _alpha_op(op: str) -> Handler:
    def handler(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
        shape, ctype = _out(meta)
        alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
        return pointwise(op, list(args[:2]), ctype, (alpha,), shape)

    return handler


for _name in ("add", "sub", "rsub"):
    handles(_name)(_alpha_op(_name))


@handles("div")
def _div(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    shape, ctype = _out(meta)
    mode = kwargs.get("rounding_mode")
    return pointwise("div", list(args[:2]), ctype, (mode,) if mode else (), shape)


@handles("pow")
def _pow(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    shape, ctype = _out(meta)
    base, exponent = args[0], args[1]
    if isinstance(exponent, (int, float)) and isinstance(base, Node):
        return pointwise("pow", [base], ctype, (exponent,), shape)
    return pointwise("pow", [base, exponent], ctype, (), shape)


@handles("gelu")
def _gelu(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    shape, ctype = _out(meta)
    approximate = kwargs.get("approximate", args[1] if len(args) > 1 else "none")
    return pointwise("gelu", [args[0]], ctype, (approximate,), shape)


@handles("elu")
def _elu(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    shape, ctype = _out(meta)
    alpha, scale, input_scale = (list(args[1:4]) + [1.0, 1.0, 1.0][len(args) - 1 :])[:3]
    return pointwise(
        "elu",
        [args[0]],
        ctype,
        (kwargs.get("alpha", alpha), kwargs.get("scale", scale), kwargs.get("input_scale", input_scale)),
        shape,
    )


@handles("leaky_relu")
def _leaky_relu(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    shape, ctype = _out(meta)
    slope = args[1] if len(args) > 1 else kwargs.get("negative_slope", 0.01)
    return pointwise("leaky_relu", [args[0]], ctype, (slope,), shape)


@handles("hardtanh")
def _hardtanh(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    shape, ctype = _out(meta)
    low = args[1] if len(args) > 1 else kwargs.get("min_val", -1.0)
    high = args[2] if len(args) > 2 else kwargs.get("max_val", 1.0)
    return pointwise("hardtanh", [args[0]], ctype, (low, high), shape)


@handles("threshold")
def _threshold(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    shape, ctype = _out(meta)
    return pointwise("threshold", [args[0]], ctype, (args[1], args[2]), shape)


@handles("clamp", "clip")
def _clamp(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    rest = list(args[1:])
    low = kwargs.get("min", rest[0] if rest else None)
    high = kwargs.get("max", rest[1] if len(rest) > 1 else None)
    return _clamped(args[0], low, high, meta)


@handles("clamp_min")
def _clamp_min(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    return _clamped(args[0], args[1] if len(args) > 1 else kwargs["min"], None, meta)


@handles("clamp_max")
def _clamp_max(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    return _clamped(args[0], None, args[1] if len(args) > 1 else kwargs["max"], meta)


def _clamped(x: Any, low: Any, high: Any, meta: Any) -> Node:
    shape, ctype = _out(meta)
    tensors = [b for b in (low, high) if isinstance(b, Node)]
    params = tuple("tensor" if isinstance(b, Node) else b for b in (low, high))
    return pointwise("clamp", [x, *tensors], ctype, params, shape)


@handles("bitwise_not")
def _bitwise_not(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    shape, ctype = _out(meta)
    if ctype == "uint8_t":  # ~mask on a bool tensor
        return pointwise("logical_not", [args[0]], ctype, shape=shape)
    return pointwise("bitwise_not", [args[0]], ctype, shape=shape)


@handles("where")
def _where(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    shape, ctype = _out(meta)
    return pointwise("where", [node(args[0]), node(args[1], ctype), node(args[2], ctype)], ctype, (), shape)


@handles("masked_fill")
def _masked_fill(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    shape, ctype = _out(meta)
    return pointwise("where", [node(args[1]), node(args[2], ctype), args[0]], ctype, (), shape)


@handles("_to_copy", "to", "type_as", "convert_element_type")
def _cast(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    shape, ctype = _out(meta)
    x = node(args[0])
    return x if x.ctype == ctype else pointwise("cast", [x], ctype, (), shape)


@handles("clone", "alias", "detach", "lift_fresh_copy", "contiguous", "dropout", "native_dropout_eval")
def _identity(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    return cast(Node, args[0])  # a tensor's value (an unusable one never reaches a handler)


@handles("copy")
def _copy(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
    shape, _ctype = _out(meta)
    return _cast([V.broadcast(node(args[1]), shape)], {}, meta)


# -- views ------------------------------------------------------------------------------
@handles("view", "_unsafe_view", "reshape", "_reshape_alias", "flatten", "unflatten", "squeeze", "unsqueeze")
def _reshape(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    return V.reshape(node(args[0]), tuple(int(s) for s in meta.shape))


@handles("expand")
def _expand(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    return V.broadcast(node(args[0]), tuple(int(s) for s in meta.shape))


@handles("permute")
def _permute(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    return V.permute(node(args[0]), list(args[1]))


@handles("transpose")
def _transpose(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    return V.transpose(node(args[0]), args[1], args[2])


@handles("t")
def _t(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    x = node(args[0])
    return V.transpose(x, 0, 1) if len(x.shape) == 2 else x


@handles("slice")
def _slice(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    x = node(args[0])
    dim, start, end, step = (list(args[1:]) + [0, None, None, 1][len(args) - 1 :])[:4]
    big = 1 << 62
    return V.slice_(x, dim, None if start is None else start, None if end is None or end >= big else end, step)


@handles("select")
def _select(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    return V.select(node(args[0]), args[1], args[2])


@handles("narrow")
def _narrow(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    return V.slice_(node(args[0]), args[1], args[2], args[2] + args[3])


@handles("flip")
def _flip(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    return V.flip(node(args[0]), list(args[1]))


@handles("gather")
def _gather(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    shape, ctype = _out(meta)
    x, dim, index = node(args[0]), args[1], node(args[2])
    return Gather(shape, ctype, base=x, index=index, dim=dim % len(x.shape))


@handles("cat", "concat")
def _cat(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    shape, ctype = _out(meta)
    parts = [node(a) for a in args[0] if node(a).numel]
    dim = (args[1] if len(args) > 1 else kwargs.get("dim", 0)) % len(shape)
    if len(parts) == 1:
        return parts[0]
    cast = [p if p.ctype == ctype else pointwise("cast", [p], ctype) for p in parts]
    return Concat(shape, ctype, parts=tuple(cast), dim=dim)


@handles("split", "split_with_sizes", "chunk", "unbind", "tensor_split")
def _split(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
    x = node(args[0])
    outs = list(meta)
    dim = args[2] if len(args) > 2 else kwargs.get("dim", 0)
    dim %= len(x.shape)
    pieces, start = [], 0
    for out in outs:
        size = int(out.shape[dim]) if len(out.shape) == len(x.shape) else 1
        piece = V.slice_(x, dim, start, start + size)
        if len(out.shape) != len(x.shape):  # unbind drops the dim
            piece = V.reshape(piece, tuple(int(s) for s in out.shape))
        pieces.append(piece)
        start += size
    return tuple(pieces)


# -- factories -----------------------------------------------------------------------------
def _factory(value_arg: int | None, value: float = 0) -> Handler:
    """A constant tensor: its value is argument ``value_arg`` (full, scalar_tensor) or ``value`` (zeros, ones)."""

    def handler(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
        shape, ctype = _out(meta)
        fill = value
        if value_arg is not None:
            fill = kwargs.get("fill_value", args[value_arg] if len(args) > value_arg else value)
        if not isinstance(fill, (int, float)):
            raise Unsupported("a tensor-valued fill")
        return Constant(shape, ctype, value=fill)

    return handler


for _name, (_arg, _value) in {
    "scalar_tensor": (0, 0),
    "full": (1, 0),
    "full_like": (1, 0),
    "new_full": (2, 0),
    "zeros": (None, 0),
    "zeros_like": (None, 0),
    "new_zeros": (None, 0),
    "ones": (None, 1),
    "ones_like": (None, 1),
    "new_ones": (None, 1),
    # uninitialised memory: a reference that reads it is wrong anyway; its traced uses are overwritten
    "empty": (None, 0),
    "empty_like": (None, 0),
    "new_empty": (None, 0),
}.items():
    handles(_name)(_factory(_arg, _value))


# -- reductions ----------------------------------------------------------------------------
def _dims_keep(args: list[Any], kwargs: dict[str, Any], first: int = 1) -> tuple[Any, bool]:
    dims = kwargs.get("dim", args[first] if len(args) > first else None)
    keep = kwargs.get("keepdim", args[first + 1] if len(args) > first + 1 else False)
    return dims, bool(keep)


def _reduction(op: str) -> Handler:
    def handler(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
        dims, keep = _dims_keep(args, kwargs)
        out = reduce(op, node(args[0]), dims, keep, _out(meta)[1] if op != "argmax" else None)
        return out

    return handler


for _op, _names in {
    "sum": ("sum",),
    "mean": ("mean",),
    "max": ("amax",),
    "min": ("amin",),
    "prod": ("prod",),
    "argmax": ("argmax",),
    "argmin": ("argmin",),
}.items():
    for _name in _names:
        handles(_name)(_reduction(_op))


def _values_indices(op: str, arg_op: str) -> Handler:
    def handler(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
        x = node(args[0])
        if len(args) == 1 and "dim" not in kwargs:  # max(x): the largest element
            return reduce(op, x, None, False)
        dims, keep = _dims_keep(args, kwargs)
        return (reduce(op, x, dims, keep), reduce(arg_op, x, dims, keep))

    return handler


handles("max")(_values_indices("max", "argmax"))
handles("min")(_values_indices("min", "argmin"))


def _truth(op: str) -> Handler:
    """any (the largest truth value over the dims is 1) and all (the smallest is)."""

    def handler(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
        dims, keep = _dims_keep(args, kwargs)
        x = node(args[0])
        truth = pointwise("where", [pointwise("ne", [x, 0], x.ctype), 1.0, 0.0], "float")
        return pointwise("gt", [reduce(op, truth, dims, keep), 0.5], "float")

    return handler


handles("any")(_truth("max"))
handles("all")(_truth("min"))
