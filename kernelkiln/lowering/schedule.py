"""Which nodes are stored, and which of them one loop nest computes together.

A *row group* is one parallel loop over the kept dimensions of an iteration shape: for
each row it runs the group's reductions in order (each a scalar for that row) and then
writes the group's outputs over the reduced dimensions, so softmax, the normalizations
and their elementwise prologues and epilogues read their row once from memory and keep
it in cache. A reduction over a dimension that is not the innermost (a *column*
reduction), a scan and a pooling window each get a loop nest of their own. A matrix
product is a *gemm* kernel; the writes that read it only at their own index (through
elementwise ops: bias, activation, scaling) join it as its epilogue.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from kernelkiln.lowering.graph import (
    Concat,
    Constant,
    Graph,
    Input,
    Matmul,
    Node,
    Patches,
    Pointwise,
    Recurrence,
    Reduce,
    Scan,
    View,
    Window,
    topological,
)


@dataclass
class Kernel:
    """One loop nest: ``kind`` row (reductions then writes over ``shape``), column, scan, window or gemm."""

    kind: str
    shape: tuple[int, ...]
    dims: tuple[int, ...] = ()  # row: the reduced (inner) dims
    reductions: list[Reduce] = field(default_factory=list)
    writes: list[Node] = field(default_factory=list)
    node: Node | None = None  # column, scan, window, gemm: the node it computes


@dataclass
class Plan:
    """The kernels in order, every stored node's buffer, and the output buffers' sources."""

    kernels: list[Kernel]
    buffers: dict[int, str]  # id(node) -> C array name
    temps: list[Node]  # scratch buffers, in tmpK order
    outputs: list[Node]  # per output: the node stored in its buffer (its reshape base, maybe)


def _rowable(node: Reduce) -> bool:
    shape = node.arg.shape
    after = range(max(node.dims) + 1, len(shape)) if node.dims else ()
    return not shape or (len(shape) - 1) in node.dims or all(shape[k] == 1 for k in after)


def _reads(node: Node, stored: set[int]) -> set[int]:
    """Stored nodes ``node``'s own computation reads (through pointwise nodes and views)."""
    found: set[int] = set()
    stack = list(node.inputs())
    seen: set[int] = set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if id(n) in stored:
            found.add(id(n))
        else:
            stack.extend(n.inputs())
    return found


def _epilogue(n: Node, mm: Matmul) -> bool:
    """``n`` reads ``mm`` only at its own linear position: through elementwise ops and reshapes, each of
    ``mm``'s size (a convolution's product is read as (N, C, H, W), a Linear's on (B, T, C) as (B * T, C))."""
    if not isinstance(n, Pointwise) or n.numel != mm.numel:
        return False
    stack: list[Node] = [n]
    seen: set[int] = set()
    while stack:
        x = stack.pop()
        if id(x) in seen or x is mm:
            continue
        seen.add(id(x))
        if not _depends(x, mm):
            continue
        if isinstance(x, Pointwise) and x.numel == mm.numel:
            stack.extend(x.args)
        elif isinstance(x, View) and x.kind == "reshape" and x.numel == mm.numel:  # keeps the linear position
            stack.append(x.base)
        else:
            return False
    return True


def _product_into_convolution(n: Node, readers: dict[int, list[Node]]) -> bool:
    """``n`` is an elementwise epilogue of one product (bias and activation) and the input of a
    convolution: stored by the product's epilogue, computed once on its finished tiles, rather than inlined
    where the convolution reads its patches, once per tap (a stored input also gives the convolution its
    blocked form): conv, ReLU, conv ran 1.95-1.99x faster stored. Between two Linears, where the second
    packs each element of its A once, inlined was 1.03x faster (the activation over a long packing loop
    rather than over short tile rows), so there it stays inlined."""
    if not isinstance(n, Pointwise) or not _read_by(n, readers, lambda r: isinstance(r, Patches)):
        return False
    stack, seen = list(n.inputs()), set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, Matmul) and _epilogue(n, x):
            return True
        if isinstance(x, Pointwise) or (isinstance(x, View) and x.kind == "reshape"):
            stack.extend(x.inputs())
    return False


def _read_by(n: Node, readers: dict[int, list[Node]], test: Callable[[Node], bool]) -> bool:
    """Whether some node reading ``n``, directly or through views, passes ``test``."""
    stack, seen = list(readers.get(id(n), ())), set()
    while stack:
        r = stack.pop()
        if id(r) not in seen:
            seen.add(id(r))
            if test(r):
                return True
            if isinstance(r, View):
                stack.extend(readers.get(id(r), ()))
    return False


def _many_taps(r: Node) -> bool:
    """``r`` reads each element of its input at several taps: a convolution's patches over a kernel of more
    than one tap, or a depthwise convolution's window."""
    if isinstance(r, Patches):
        return math.prod(r.shape[2 : 2 + r.rank]) > 1
    return isinstance(r, Window) and r.op == "dot"


def _convolution_input(n: Node, readers: dict[int, list[Node]]) -> bool:
    """``n`` is elementwise (a normalization and activation, a concatenation) and read at several taps by a
    convolution: stored once, rather than inlined where the convolution reads it, once per tap (and through
    every branch of a concatenation); a stored input also gives a stride-1 convolution its blocked form.
    A DenseNet-121 dense block (BatchNorm and ReLU of the concatenated features, then a 3x3 convolution)
    ran 8.7-9.1x faster so."""
    return isinstance(n, (Pointwise, Concat)) and _read_by(n, readers, _many_taps)


def _depends(node: Node, target: Node) -> bool:
    stack, seen = [node], set()
    while stack:
        x = stack.pop()
        if x is target:
            return True
        if id(x) not in seen:
            seen.add(id(x))
            stack.extend(x.inputs())
    return False


def plan(graph: Graph, solo: set[int], temp_prefix: str = "tmp") -> Plan:
    """Kernels for ``graph``; ``solo`` nodes neither join nor take others into a group."""
    buffers: dict[int, str] = {id(i): f"in{i.position}" for i in graph.inputs}
    targets: list[Node] = []
    for k, out in enumerate(graph.outputs):
        target = out
        while (
            isinstance(target, View)
            and target.kind == "reshape"
            and not isinstance(target.base, (Input, Constant))
            and id(target.base) not in buffers
        ):
            target = target.base
        if isinstance(target, (Input, Constant, View)) or id(target) in buffers:
            target = Pointwise(out.shape, out.ctype, op="identity", args=(out,))  # a fresh copy
        buffers[id(target)] = f"out{k}"
        targets.append(target)
    order = topological(targets)
    readers: dict[int, list[Node]] = {}
    for n in order:
        for a in n.inputs():
            readers.setdefault(id(a), []).append(n)
    temps: list[Node] = []
    depth: dict[int, int] = {}  # elementwise nodes inlined under each, down to stored ones
    for n in order:
        inlined = 0 if id(n) in buffers else 1 + max((depth[id(a)] for a in n.inputs()), default=0)
        if id(n) not in buffers and (
            isinstance(n, (Reduce, Scan, Window, Matmul, Recurrence))
            or _too_deep(n, inlined)
            or _product_into_convolution(n, readers)
            or _convolution_input(n, readers)
            or (isinstance(n, Pointwise) and n.op == "store")
        ):
            buffers[id(n)] = f"{temp_prefix}{len(temps)}"
            temps.append(n)
            inlined = 0
        depth[id(n)] = inlined
    stored = set(buffers)
    kernels: list[Kernel] = []
    current: Kernel | None = None
    for n in order:
        if id(n) not in stored or isinstance(n, Input):
            continue
        reads = _reads(n, stored)
        if current is not None and current.kind == "gemm":
            if (
                id(n) not in solo
                and _epilogue(n, cast(Matmul, current.node))
                and not any(id(w) in reads for w in current.writes)
            ):
                current.writes.append(n)
                continue
            current = None
        if current is not None and id(n) not in solo and _joins(current, n, reads, solo):
            if isinstance(n, Reduce):
                current.reductions.append(n)
            else:
                current.writes.append(n)
            continue
        current = None
        if isinstance(n, Reduce) and _rowable(n):
            current = Kernel("row", n.arg.shape, n.dims, reductions=[n])
        elif isinstance(n, Reduce):
            kernels.append(Kernel("column", n.arg.shape, n.dims, node=n))
            continue
        elif isinstance(n, Matmul):
            current = Kernel("gemm", n.shape, node=n)
            kernels.append(current)
            continue
        elif isinstance(n, (Scan, Window, Recurrence)):
            kind = "scan" if isinstance(n, Scan) else "window" if isinstance(n, Window) else "recurrence"
            kernels.append(Kernel(kind, n.shape, node=n))
            continue
        else:
            current = Kernel("row", n.shape, (len(n.shape) - 1,) if n.shape else (), writes=[n])
        kernels.append(current)
        if id(n) in solo:
            current = None
    return Plan(kernels, buffers, temps, targets)


# An elementwise expression this deep is stored, not inlined where it is read: an LSTM's cell state over its
# steps is one chain as long as the sequence, and every step's product reads it (inlined, the code grows
# with the square of the length: 237 MB of C for 6 layers of 128 steps).
MAX_INLINE_DEPTH = 48


def _too_deep(n: Node, inlined: int) -> bool:
    return isinstance(n, Pointwise) and inlined > MAX_INLINE_DEPTH


def _joins(group: Kernel, n: Node, reads: set[int], solo: set[int]) -> bool:
    if any(id(m) in solo for m in group.reductions + group.writes):
        return False
    if any(id(w) in reads for w in group.writes):
        return False  # a written value is complete only after the whole loop
    if isinstance(n, Reduce):
        return not group.writes and _rowable(n) and n.arg.shape == group.shape and n.dims == group.dims
    return n.shape == group.shape


def read_back(plan: Plan) -> set[int]:
    """Stored nodes some kernel of ``plan`` reads: an output outside this set is never read again in the call."""
    stored = set(plan.buffers)
    found: set[int] = set()
    for kernel in plan.kernels:
        for m in _members(kernel):
            found |= _reads(m, stored)
    return found


def _members(kernel: Kernel) -> list[Node]:
    """The nodes one loop nest computes: its reductions, its writes and its product, scan or window."""
    return kernel.reductions + kernel.writes + ([kernel.node] if kernel.node is not None else [])


def needs_buffer(plan: Plan, graph_outputs: list[Node]) -> set[int]:
    """Reductions whose value is read outside their own row group (or is an output): they are stored."""
    stored = set(plan.buffers)
    readers: dict[int, set[int]] = {}
    for kernel in plan.kernels:
        members = _members(kernel)
        mine = {id(m) for m in members}
        for m in members:
            for r in _reads(m, stored):
                if r not in mine:
                    readers.setdefault(r, set()).add(id(m))
    outputs = {id(o) for o in plan.outputs}
    return {r for r in stored if r in readers or r in outputs}
