"""Handlers for ATen's indexing and index-made tensors: arange, index_select, indexing by one tensor, unfold,
constant padding; views and gathers, nothing stored."""

from __future__ import annotations

from typing import Any

from kernelkiln.lowering import views as V
from kernelkiln.lowering.aten import Lowered, ctype_of, handles, node
from kernelkiln.lowering.graph import Concat, Constant, Gather, Iota, Node, Unsupported


@handles("arange")
def _arange(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Lowered:
    """arange(end), arange(start, end), arange(start, end, step): traced at the workload, so all numbers."""
    shape, ctype = tuple(int(s) for s in meta.shape), ctype_of(meta.dtype)
    start = args[0] if len(args) >= 2 else kwargs.get("start", 0)
    step = args[2] if len(args) >= 3 else kwargs.get("step", 1)
    if not all(isinstance(v, (int, float)) for v in (start, step)):
        raise Unsupported("aten.arange with tensor-valued bounds")
    return Iota(shape, ctype, start=start, step=step)


@handles("index_select")
def _index_select(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    return _taken(node(args[0]), args[1], node(args[2]))


@handles("index")
def _index(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    """``x[..., idx, ...]`` with one index tensor (the others None): a gather along its dim."""
    x, indices = node(args[0]), list(args[1])
    used = [d for d, i in enumerate(indices) if i is not None]
    if len(used) != 1:
        raise Unsupported("advanced indexing with more than one index tensor (aten.index)")
    return _taken(x, used[0], node(indices[used[0]]))


def _taken(x: Node, dim: int, index: Node) -> Node:
    """``x`` with ``dim`` replaced by ``index``'s dims, each element the one ``index`` names (no negative
    index: they are read as they are)."""
    dim %= len(x.shape)
    if index.ctype not in ("int64_t", "int32_t"):
        raise Unsupported(f"an index tensor of C type {index.ctype}")
    flat = (*x.shape[:dim], index.numel, *x.shape[dim + 1 :])
    spread = V.broadcast(V.reshape(index, (*(1,) * dim, index.numel, *(1,) * (len(x.shape) - dim - 1))), flat)
    taken = Gather(flat, x.ctype, base=x, index=spread, dim=dim)
    return V.reshape(taken, (*x.shape[:dim], *index.shape, *x.shape[dim + 1 :]))


@handles("unfold")
def _unfold(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    return V.unfold(node(args[0]), int(args[1]), int(args[2]), int(args[3]))


@handles("constant_pad_nd")
def _constant_pad(args: list[Any], kwargs: dict[str, Any], meta: Any) -> Node:
    """F.pad's constant mode: per padded dim (the last first, as pad lists them) a crop where the padding is
    negative and the value concatenated either side where it is positive (a test where it is read)."""
    x, pad = node(args[0]), list(args[1])
    value = args[2] if len(args) > 2 else kwargs.get("value", 0)
    if not isinstance(value, (int, float)):
        raise Unsupported("constant_pad_nd with a tensor-valued fill")
    for k in range(len(pad) // 2):
        dim, (low, high) = len(x.shape) - 1 - k, pad[2 * k : 2 * k + 2]
        x = V.slice_(x, dim, max(0, -low), x.shape[dim] - max(0, -high))
        parts = []
        for size in (low, None, high):
            if size is None:
                parts.append(x)
            elif size > 0:
                parts.append(Constant((*x.shape[:dim], size, *x.shape[dim + 1 :]), x.ctype, value=value))
        if len(parts) > 1:
            shape = (*x.shape[:dim], sum(p.shape[dim] for p in parts), *x.shape[dim + 1 :])
            x = Concat(shape, x.ctype, parts=tuple(parts), dim=dim)
    return x
