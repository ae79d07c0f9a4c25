"""Views as index maps: reshape, broadcast, permute, slice, select, flip.

A view never copies: reading it at an index reads its base at the mapped index. A
reshape splits and merges dimensions on their common refinement, so a reshape that only
groups dimensions (N, G, C/G, H, W) ↔ (N, C, H, W) costs a division on the outer
dimension only and the innermost loop stays contiguous.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from kernelkiln.lowering.graph import Index, Node, Unsupported, View, contiguous_strides


def _suffix_products(shape: tuple[int, ...]) -> list[int]:
    out, step = [], 1
    for size in reversed(shape):
        step *= size
        out.append(step)
    return out


def _refinement(a: tuple[int, ...], b: tuple[int, ...]) -> list[int] | None:
    """Sizes (outer to inner) both shapes are merges of, or None when the splits cross."""
    bounds = sorted({1, *_suffix_products(a), *_suffix_products(b)})
    if any(hi % lo for lo, hi in itertools.pairwise(bounds)):
        return None
    return [hi // lo for lo, hi in itertools.pairwise(bounds)][::-1]


def _groups(shape: tuple[int, ...], refined: list[int]) -> list[list[int]]:
    """For each dim of ``shape``, the refined dims (positions) it is made of; size-1 dims get []."""
    groups, pos = [], 0
    for size in shape:
        members, product = [], 1
        while product < size:
            members.append(pos)
            product *= refined[pos]
            pos += 1
        groups.append(members)
    return groups


def reshape(base: Node, shape: tuple[int, ...]) -> Node:
    shape = tuple(int(s) for s in shape)
    if math.prod(shape) != base.numel:
        raise Unsupported(f"reshape of {base.shape} to {shape}")
    while isinstance(base, View) and base.kind == "reshape":  # reshapes keep the linear order: one is enough
        base = base.base  # (a group norm's (N, G, C/G·H·W) and back is its input, not two index maps per read)
    if shape == base.shape:
        return base
    old = base.shape
    refined = _refinement(old, shape) if base.numel else None
    if refined is None:
        return View(shape, base.ctype, base=base, where=_linear_map(old, shape), kind="reshape")
    new_groups, old_groups = _groups(shape, refined), _groups(old, refined)

    def where(idx: Index) -> Index:
        parts: dict[int, str] = {}
        for i, members in zip(idx, new_groups, strict=True):
            inner = 1
            for position in reversed(members):
                size = refined[position]
                term = i if inner == 1 else f"({i})/{inner}"
                parts[position] = term if position == members[0] else f"({term})%{size}"
                inner *= size
        out = []
        for members in old_groups:
            terms, inner = [], 1
            for position in reversed(members):
                terms.append(parts[position] if inner == 1 else f"({parts[position]})*{inner}")
                inner *= refined[position]
            out.append(" + ".join(reversed(terms)) or "0")
        return tuple(out)

    return View(shape, base.ctype, base=base, where=where, kind="reshape")


def _linear_map(old: tuple[int, ...], new: tuple[int, ...]) -> Callable[[Index], Index]:
    new_strides, old_strides = contiguous_strides(new), contiguous_strides(old)

    def where(idx: Index) -> Index:
        flat = " + ".join(f"({i})*{s}" for i, s in zip(idx, new_strides, strict=True)) or "0"
        return tuple(f"(({flat})/{s})%{size}" for s, size in zip(old_strides, old, strict=True))

    return where


def broadcast(base: Node, shape: tuple[int, ...]) -> Node:
    """``base`` broadcast to ``shape`` (numpy rules: align right, size-1 dims repeat)."""
    shape = tuple(int(s) for s in shape)
    if base.shape == shape:
        return base
    lead = len(shape) - len(base.shape)
    if lead < 0 or any(b not in (1, s) for b, s in zip(base.shape, shape[lead:], strict=True)):
        raise Unsupported(f"broadcast of {base.shape} to {shape}")
    sizes = base.shape

    def where(idx: Index) -> Index:
        return tuple("0" if size == 1 else i for i, size in zip(idx[lead:], sizes, strict=True))

    return View(shape, base.ctype, base=base, where=where)


def permute(base: Node, dims: list[int]) -> Node:
    dims = [d % len(base.shape) for d in dims] if base.shape else []
    if dims == list(range(len(base.shape))):
        return base
    inverse = [dims.index(k) for k in range(len(dims))]

    def where(idx: Index) -> Index:
        return tuple(idx[inverse[k]] for k in range(len(dims)))

    return View(tuple(base.shape[d] for d in dims), base.ctype, base=base, where=where)


def transpose(base: Node, a: int, b: int) -> Node:
    dims = list(range(len(base.shape)))
    if dims:
        a, b = a % len(dims), b % len(dims)
        dims[a], dims[b] = dims[b], dims[a]
    return permute(base, dims)


def slice_(base: Node, dim: int, start: int | None, end: int | None, step: int = 1) -> Node:
    dim %= len(base.shape)
    size = base.shape[dim]
    start, end, _ = slice(start, end, step).indices(size)
    length = max(0, -(-(end - start) // step))
    if (start, length, step) == (0, size, 1):
        return base
    shape = (*base.shape[:dim], length, *base.shape[dim + 1 :])

    def where(idx: Index) -> Index:
        i = idx[dim] if step == 1 else f"({idx[dim]})*{step}"
        return (*idx[:dim], i if start == 0 else f"{start} + {i}", *idx[dim + 1 :])

    return View(shape, base.ctype, base=base, where=where)


def unfold(base: Node, dim: int, size: int, step: int) -> Node:
    """``Tensor.unfold``: ``dim``'s windows of ``size`` every ``step``, the window's element as a new last dim."""
    dim %= len(base.shape)
    count = (base.shape[dim] - size) // step + 1
    shape = (*base.shape[:dim], count, *base.shape[dim + 1 :], size)

    def where(idx: Index) -> Index:
        start = idx[dim] if step == 1 else f"({idx[dim]})*{step}"
        return (*idx[:dim], f"{start} + ({idx[-1]})", *idx[dim + 1 : -1])

    return View(shape, base.ctype, base=base, where=where)


def select(base: Node, dim: int, index: int) -> Node:
    dim %= len(base.shape)
    index %= base.shape[dim]
    shape = base.shape[:dim] + base.shape[dim + 1 :]

    def where(idx: Index) -> Index:
        return (*idx[:dim], str(index), *idx[dim:])

    return View(shape, base.ctype, base=base, where=where)


def flip(base: Node, dims: list[int]) -> Node:
    flipped = {d % len(base.shape) for d in dims}
    sizes = base.shape

    def where(idx: Index) -> Index:
        return tuple(f"{sizes[k] - 1} - ({i})" if k in flipped and sizes[k] > 1 else i for k, i in enumerate(idx))

    return View(base.shape, base.ctype, base=base, where=where)
