"""Handlers for the composite operations ATen keeps whole: softmax, normalizations, norms, scans, pooling, losses."""

from __future__ import annotations

import math
from typing import Any

from kernelkiln.lowering import views as V
from kernelkiln.lowering.aten import Handler, Lowered, Unusable, ctype_of, handles, moments, node, pointwise, reduce
from kernelkiln.lowering.graph import Node, Scan, Unsupported, View, Window


def _dim_list(x: Node, dims: Any) -> tuple[int, ...]:
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        return tuple(range(len(x.shape)))
    dims = [dims] if isinstance(dims, int) else dims
    return tuple(sorted({d % len(x.shape) for d in dims}))


def _squeezed(x: Node, dims: tuple[int, ...], keep: bool) -> Node:
    return x if keep else V.reshape(x, tuple(s for k, s in enumerate(x.shape) if k not in dims))


@handles("_softmax", "softmax", "_safe_softmax")
def _softmax(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    x, dim = node(args[0]), args[1]
    top = reduce("max", x, [dim], True)
    e = pointwise("exp", [pointwise("sub", [x, top], x.ctype)], x.ctype)
    return pointwise("div", [e, reduce("sum", e, [dim], True)], x.ctype)


@handles("_log_softmax", "log_softmax")
def _log_softmax(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    x, dim = node(args[0]), args[1]
    top = reduce("max", x, [dim], True)
    shifted = pointwise("sub", [x, top], x.ctype)
    total = reduce("sum", pointwise("exp", [shifted], x.ctype), [dim], True)
    return pointwise("sub", [shifted, pointwise("log", [total], x.ctype)], x.ctype)


@handles("logsumexp")
def _logsumexp(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    x = node(args[0])
    dims = _dim_list(x, args[1] if len(args) > 1 else kwargs.get("dim"))
    keep = bool(args[2] if len(args) > 2 else kwargs.get("keepdim", False))
    top = reduce("max", x, dims, True)
    safe = pointwise("where", [pointwise("eq", [top, float("-inf")], x.ctype), 0.0, top], x.ctype)
    total = reduce("sum", pointwise("exp", [pointwise("sub", [x, safe], x.ctype)], x.ctype), dims, True)
    return _squeezed(pointwise("add", [pointwise("log", [total], x.ctype), safe], x.ctype, (1,)), dims, keep)


def _affine(y: Node, weight: Any, bias: Any, shape_for: Any) -> Node:
    if weight is not None:
        y = pointwise("mul", [y, shape_for(node(weight))], y.ctype)
    if bias is not None:
        y = pointwise("add", [y, shape_for(node(bias))], y.ctype, (1,))
    return y


@handles("native_layer_norm", "layer_norm")
def _layer_norm(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
    x, normalized, weight, bias, eps = node(args[0]), args[1], args[2], args[3], args[4]
    dims = tuple(range(len(x.shape) - len(normalized), len(x.shape)))
    mean, var = moments(x, dims)
    rstd = pointwise("rsqrt", [pointwise("add", [var, float(eps)], x.ctype, (1,))], x.ctype)
    y = pointwise("mul", [pointwise("sub", [x, mean], x.ctype), rstd], x.ctype)
    return (_affine(y, weight, bias, lambda p: p), mean, rstd)


@handles("rms_norm", "_fused_rms_norm")
def _rms_norm(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
    x, normalized = node(args[0]), args[1]
    weight = args[2] if len(args) > 2 else kwargs.get("weight")
    eps = args[3] if len(args) > 3 else kwargs.get("eps")
    if eps is None:
        eps = {"float": 1.1920928955078125e-07, "double": 2.220446049250313e-16}[x.ctype]
    dims = tuple(range(len(x.shape) - len(normalized), len(x.shape)))
    square = reduce("mean", pointwise("mul", [x, x], x.ctype), dims, True)
    rstd = pointwise("rsqrt", [pointwise("add", [square, float(eps)], x.ctype, (1,))], x.ctype)
    y = _affine(pointwise("mul", [x, rstd], x.ctype), weight, None, lambda p: p)
    return (y, rstd) if "fused" in str(meta) else y


@handles("native_group_norm")
def _group_norm(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
    x, weight, bias, n, c, hw, groups, eps = node(args[0]), *args[1:8]
    per = c // groups
    grouped = V.reshape(x, (n, groups, per, hw))
    mean, var = moments(grouped, (2, 3))
    rstd = pointwise("rsqrt", [pointwise("add", [var, float(eps)], x.ctype, (1,))], x.ctype)
    y = pointwise("mul", [pointwise("sub", [grouped, mean], x.ctype), rstd], x.ctype)

    def per_channel(p: Node) -> Node:  # (C,) read at (n, g, c, s) as channel g * per + c
        return View((n, groups, per, hw), p.ctype, base=p, where=lambda idx: (f"({idx[1]})*{per} + ({idx[2]})",))

    y = _affine(y, weight, bias, per_channel)
    return (V.reshape(y, x.shape), V.reshape(mean, (n, groups)), V.reshape(rstd, (n, groups)))


def _channel(x: Node, p: Node) -> Node:
    return V.reshape(p, (x.shape[1],) + (1,) * (len(x.shape) - 2))


@handles(
    "native_batch_norm",
    "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training",
    "_native_batch_norm_legit_functional",
    "batch_norm",
)
def _batch_norm(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
    x, weight, bias = node(args[0]), args[1], args[2]
    if len(args) == 7:  # _native_batch_norm_legit_no_training(x, w, b, mean, var, momentum, eps)
        running_mean, running_var, training, eps = args[3], args[4], False, args[6]
    elif len(args) == 6:  # _native_batch_norm_legit(x, w, b, training, momentum, eps): no running stats
        running_mean, running_var, training, eps = None, None, args[3], args[5]
    else:
        running_mean, running_var, training, eps = args[3], args[4], args[5], args[7]
    dims = tuple(k for k in range(len(x.shape)) if k != 1)
    if training or running_mean is None:
        mean, var = moments(x, dims)
    else:
        mean, var = _channel(x, node(running_mean)), _channel(x, node(running_var))
    rstd = pointwise("rsqrt", [pointwise("add", [var, float(eps)], x.ctype, (1,))], x.ctype)
    y = pointwise("mul", [pointwise("sub", [x, mean], x.ctype), rstd], x.ctype)
    y = _affine(y, weight, bias, lambda p: _channel(x, p))
    stats = (Unusable("batch norm's saved mean"), Unusable("batch norm's saved inverse std"))
    extra = (Unusable("batch norm's updated running mean"), Unusable("batch norm's updated running var"))
    return (y, *stats, *extra) if "functional" in str(meta) else (y, *stats)


def _correction(args: list[Any], kwargs: dict[str, Any]) -> float:
    value = kwargs.get("correction", kwargs.get("unbiased"))
    if value is None:
        return 1.0
    return float(value)


def _variance_of(which: str) -> Handler:
    def handler(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
        x = node(args[0])
        dims = _dim_list(x, args[1] if len(args) > 1 else kwargs.get("dim"))
        keep = bool(kwargs.get("keepdim", args[3] if len(args) > 3 else False))
        mean, var = moments(x, dims, _correction(args, kwargs))
        spread = pointwise("sqrt", [var], x.ctype) if which.startswith("std") else var
        spread = _squeezed(spread, dims, keep)
        return (spread, _squeezed(mean, dims, keep)) if which.endswith("mean") else spread

    return handler


for _which in ("var", "std", "var_mean", "std_mean"):
    handles(_which)(_variance_of(_which))


@handles("linalg_vector_norm", "norm")
def _vector_norm(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    x = node(args[0])
    order = args[1] if len(args) > 1 else kwargs.get("ord", kwargs.get("p", 2))
    order = 2 if order in (None, "fro") else order
    dims = _dim_list(x, args[2] if len(args) > 2 else kwargs.get("dim"))
    keep = bool(args[3] if len(args) > 3 else kwargs.get("keepdim", False))
    size = pointwise("abs", [x], x.ctype)
    if order == math.inf:
        out = reduce("max", size, dims, keep)
    elif order == 1:
        out = reduce("sum", size, dims, keep)
    elif order == 2:
        out = pointwise("sqrt", [reduce("sum", pointwise("mul", [x, x], x.ctype), dims, keep)], x.ctype)
    elif isinstance(order, (int, float)) and order > 0:
        total = reduce("sum", pointwise("pow", [size], x.ctype, (float(order),)), dims, keep)
        out = pointwise("pow", [total], x.ctype, (1.0 / float(order),))
    else:
        raise Unsupported(f"vector norm of order {order}")
    return out


def _scan(op: str) -> Handler:
    def handler(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
        x = node(args[0])
        ctype = ctype_of(meta.dtype)
        if x.ctype != ctype:
            x = pointwise("cast", [x], ctype)
        return Scan(x.shape, ctype, op=op, arg=x, dim=args[1] % max(1, len(x.shape)))

    return handler


handles("cumsum")(_scan("sum"))
handles("cumprod")(_scan("prod"))


def _window_args(args: list[Any], rank: int) -> tuple[tuple[int, ...], ...]:
    def spread(value: Any, default: Any) -> tuple[int, ...]:
        if value is None or (isinstance(value, (list, tuple)) and not value):
            value = default
        value = list(value) if isinstance(value, (list, tuple)) else [value]
        return tuple(int(v) for v in (value * rank if len(value) == 1 else value))

    kernel = spread(args[1], None)
    stride = spread(args[2] if len(args) > 2 else None, kernel)
    padding = spread(args[3] if len(args) > 3 else 0, 0)
    return kernel, stride, padding


@handles(
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
)
def _max_pool(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
    out = meta[0] if isinstance(meta, (tuple, list)) else meta
    x = node(args[0])
    rank = _spatial_rank(args)
    kernel, stride, padding = _window_args(args, rank)
    dilation = _window_args([None, args[4] if len(args) > 4 else 1], rank)[0]
    values = Window(
        tuple(int(s) for s in out.shape),
        x.ctype,
        op="max",
        arg=x,
        kernel=kernel,
        stride=stride,
        padding=padding,
        dilation=dilation,
    )
    return (values, Unusable("max pooling's indices")) if isinstance(meta, (tuple, list)) else values


def _spatial_rank(args: list[Any]) -> int:
    kernel = args[1]
    return len(kernel) if isinstance(kernel, (list, tuple)) else 1


@handles("avg_pool1d", "avg_pool2d", "avg_pool3d")
def _avg_pool(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    x = node(args[0])
    rank = _spatial_rank(args)
    kernel, stride, padding = _window_args(args, rank)
    include = bool(args[5]) if len(args) > 5 else kwargs.get("count_include_pad", True)
    divisor = args[6] if len(args) > 6 else kwargs.get("divisor_override")
    return Window(
        tuple(int(s) for s in meta.shape),
        x.ctype,
        op="avg",
        arg=x,
        kernel=kernel,
        stride=stride,
        padding=padding,
        dilation=(1,) * rank,
        count_include_pad=include,
        divisor=divisor,
    )


@handles("_adaptive_avg_pool2d", "adaptive_avg_pool2d", "_adaptive_avg_pool1d", "adaptive_avg_pool1d")
def _adaptive_avg_pool(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    x = node(args[0])
    out = tuple(int(s) for s in meta.shape)
    rank = len(args[1]) if isinstance(args[1], (list, tuple)) else 1
    sizes, targets = x.shape[-rank:], out[-rank:]
    if any(s % t for s, t in zip(sizes, targets, strict=True)):
        raise Unsupported("adaptive average pooling to a size that does not divide the input")
    kernel = tuple(s // t for s, t in zip(sizes, targets, strict=True))
    return Window(
        out, x.ctype, op="avg", arg=x, kernel=kernel, stride=kernel, padding=(0,) * rank, dilation=(1,) * rank
    )


_REDUCTIONS = {0: None, 1: "mean", 2: "sum"}


def _reduced(loss: Node, reduction: Any) -> Node:
    mode = _REDUCTIONS.get(reduction, reduction) if not isinstance(reduction, str) else reduction
    if mode in (None, "none"):
        return loss
    return reduce(mode, loss, None, False)


@handles("mse_loss")
def _mse(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    d = pointwise("sub", [args[0], args[1]], node(args[0]).ctype, (1,))
    return _reduced(pointwise("mul", [d, d], d.ctype), args[2] if len(args) > 2 else kwargs.get("reduction", 1))


@handles("l1_loss")
def _l1(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    d = pointwise("sub", [args[0], args[1]], node(args[0]).ctype, (1,))
    return _reduced(pointwise("abs", [d], d.ctype), args[2] if len(args) > 2 else kwargs.get("reduction", 1))


def _huber_like(which: str) -> Handler:
    def handler(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
        x = node(args[0])
        reduction = args[2] if len(args) > 2 else kwargs.get("reduction", 1)
        width = float(args[3] if len(args) > 3 else kwargs.get("beta" if which == "smooth" else "delta", 1.0))
        d = pointwise("abs", [pointwise("sub", [x, args[1]], x.ctype, (1,))], x.ctype)
        quadratic = pointwise(
            "mul", [pointwise("mul", [d, d], x.ctype), 0.5 / width if which == "smooth" else 0.5], x.ctype
        )
        linear = pointwise("sub", [d, 0.5 * width], x.ctype, (1,))
        if which != "smooth":
            linear = pointwise("mul", [linear, width], x.ctype)
        small = pointwise("lt", [d, width], x.ctype)
        if which == "smooth" and width == 0:
            return _reduced(d, reduction)
        return _reduced(pointwise("where", [small, quadratic, linear], x.ctype), reduction)

    return handler


handles("smooth_l1_loss")(_huber_like("smooth"))
handles("huber_loss")(_huber_like("huber"))
