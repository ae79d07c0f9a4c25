"""The lowering's graph: tensors as nodes with static shapes, read by index.

Every node can be read at a multi-index (one C expression per dimension). Inputs,
reductions, scans and windows are stored in buffers; pointwise nodes and views are
computed where they are read, so a chain of them costs one pass over memory.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Index = tuple[str, ...]
CTYPES = {
    "float32": "float",
    "float64": "double",
    "int64": "int64_t",
    "int32": "int32_t",
    "bool": "uint8_t",
    "uint8": "uint8_t",
}
FLOATS = ("float", "double")


def promote(*ctypes: str) -> str:
    """The widest of ``ctypes`` in torch's order (double, float, int64, int32, bool); float when none."""
    for t in ("double", "float", "int64_t", "int32_t", "uint8_t"):
        if t in ctypes:
            return t
    return "float"


class Unsupported(Exception):
    """An operation, dtype or pattern the lowering cannot express (yet); ``str()`` is one line."""


@dataclass(eq=False)
class Node:
    """A tensor of static ``shape`` whose elements have C type ``ctype``."""

    shape: tuple[int, ...]
    ctype: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def inputs(self) -> tuple[Node, ...]:
        return ()


@dataclass(eq=False)
class Input(Node):
    """The ``position``-th tensor the kernel is given (a parameter, buffer or forward input)."""

    position: int = 0
    name: str = ""


@dataclass(eq=False)
class Constant(Node):
    """One value broadcast to ``shape``."""

    value: float | int | bool = 0


@dataclass(eq=False)
class Iota(Node):
    """``start + i * step`` at position i of its one dim (``torch.arange``): a mask's row and column numbers."""

    start: float | int = 0
    step: float | int = 1


@dataclass(eq=False)
class Pointwise(Node):
    """``op`` applied element by element; ``args`` broadcast to ``shape`` (numpy rules)."""

    op: str = ""
    args: tuple[Node, ...] = ()
    params: tuple[Any, ...] = ()  # the op's scalar parameters (alpha, bounds, approximation, ...)

    def inputs(self) -> tuple[Node, ...]:
        return self.args


@dataclass(eq=False)
class View(Node):
    """``base`` read through an index map: ``where(index)`` gives the base's index."""

    base: Node = field(kw_only=True)
    where: Callable[[Index], Index] = field(default=lambda idx: idx)
    kind: str = "view"  # reshape views of contiguous data keep the linear order

    def inputs(self) -> tuple[Node, ...]:
        return (self.base,)


@dataclass(eq=False)
class Gather(Node):
    """``base`` read at ``index``'s value along ``dim`` (torch.gather)."""

    base: Node = field(kw_only=True)
    index: Node = field(kw_only=True)
    dim: int = 0

    def inputs(self) -> tuple[Node, ...]:
        return (self.base, self.index)


@dataclass(eq=False)
class Concat(Node):
    """``parts`` joined along ``dim`` (torch.cat)."""

    parts: tuple[Node, ...] = ()
    dim: int = 0

    def inputs(self) -> tuple[Node, ...]:
        return self.parts


@dataclass(eq=False)
class Reduce(Node):
    """``arg`` reduced over ``dims`` by ``op`` (sum, prod, max, min, argmax, argmin); keeps the dims as 1."""

    op: str = "sum"
    arg: Node = field(kw_only=True)
    dims: tuple[int, ...] = ()
    scale: float = 1.0  # the result is multiplied by it: a mean is a sum scaled by 1/count

    def inputs(self) -> tuple[Node, ...]:
        return (self.arg,)


@dataclass(eq=False)
class Scan(Node):
    """Running ``op`` (sum, prod) of ``arg`` along ``dim``."""

    op: str = "sum"
    arg: Node = field(kw_only=True)
    dim: int = 0

    def inputs(self) -> tuple[Node, ...]:
        return (self.arg,)


@dataclass(eq=False)
class Window(Node):
    """Pooling over the trailing ``len(kernel)`` dims of ``arg``: max or avg, PyTorch's rules; or ``dot``, a
    depthwise convolution: each channel's window weighted by its own ``weight`` (C, *kernel) and summed."""

    op: str = "max"
    arg: Node = field(kw_only=True)
    weight: Node | None = field(default=None, kw_only=True)
    kernel: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    dilation: tuple[int, ...] = ()
    count_include_pad: bool = True
    divisor: int | None = None

    def inputs(self) -> tuple[Node, ...]:
        return (self.arg,) if self.weight is None else (self.arg, self.weight)


@dataclass(eq=False)
class Matmul(Node):
    """``a @ b`` over the last two dims, the leading (batch) dims equal: float32, computed by the GEMM kernel."""

    a: Node = field(kw_only=True)  # (..., M, K)
    b: Node = field(kw_only=True)  # (..., K, N)

    def inputs(self) -> tuple[Node, ...]:
        return (self.a, self.b)


@dataclass(eq=False)
class Patches(Node):
    """What a convolution reads: ``base`` (N, C, *S) as (N, C, *K, *O) over r = 2 or 3 spatial dims, zero
    outside it.

    Tap k at output o reads the input at ``y = o * stride - padding + k * dilation`` (padding may be
    negative: a crop). A transposed convolution is forward ones over its input, one per output phase
    (``aten_matmul``).
    """

    base: Node = field(kw_only=True)
    stride: tuple[int, ...] = (1, 1)
    padding: tuple[int, ...] = (0, 0)
    dilation: tuple[int, ...] = (1, 1)

    def inputs(self) -> tuple[Node, ...]:
        return (self.base,)

    @property
    def rank(self) -> int:
        return len(self.stride)

    def always_inside(self) -> bool:
        """Whether every tap of every output position reads an element of ``base`` (no test needed)."""
        r = self.rank
        extents = self.base.shape[2:]
        kernel, out = self.shape[2 : 2 + r], self.shape[2 + r :]
        return all(
            p <= 0 and (o - 1) * s - p + (k - 1) * d <= e - 1
            for p, s, d, k, o, e in zip(self.padding, self.stride, self.dilation, kernel, out, extents, strict=True)
        )


@dataclass(eq=False)
class Recurrence(Node):
    """One direction of one recurrent layer (LSTM, GRU or Elman RNN) over its T steps, as one loop over time.

    Stored as (T + 1, B, H), an LSTM's as (T + 2, B, H): row t < T is h after step t (in the input's time
    order, also when ``reverse`` runs it backwards), row T the final h, row T + 1 the final cell state.
    ``gates`` holds the input's share of every gate at every step (x_t W_ih^T + b_ih, computed before the
    loop as one product); the loop adds h W_hh^T + b_hh and applies PyTorch's cell in its gate order
    (LSTM i, f, g, o; GRU r, z, n).
    """

    mode: str = "lstm"  # lstm, gru, rnn_tanh or rnn_relu
    gates: Node = field(kw_only=True)  # (T, B, G * H)
    h0: Node = field(kw_only=True)  # (B, H)
    c0: Node | None = field(default=None, kw_only=True)  # (B, H): an LSTM's
    weight: Node = field(kw_only=True)  # W_hh (G * H, H)
    bias: Node | None = field(default=None, kw_only=True)  # b_hh (G * H)
    reverse: bool = False

    def inputs(self) -> tuple[Node, ...]:
        return tuple(n for n in (self.gates, self.h0, self.c0, self.weight, self.bias) if n is not None)


STORED = (Input, Reduce, Scan, Window, Matmul, Recurrence)


@dataclass
class Graph:
    """One workload's computation: its inputs in call order and its outputs."""

    inputs: list[Input]
    outputs: list[Node]
    ops: list[str]  # the ATen ops traced, for messages


def topological(outputs: list[Node]) -> list[Node]:
    """Every node the outputs depend on, each after its inputs."""
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(n, False) for n in reversed(outputs)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((n, False) for n in reversed(node.inputs()) if id(n) not in seen)
    return order


def constant(node: Node) -> bool:
    """Whether ``node`` reads only parameters, buffers and constants (no forward input): the same on
    every call while the parameters are."""
    return all(not isinstance(n, Input) or n.name.startswith("param:") for n in topological([node]) if not n.inputs())


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def linear(index: Index, shape: tuple[int, ...]) -> str:
    """The C expression of ``index``'s offset in a contiguous tensor of ``shape``."""
    terms = [
        f"({i})" if stride == 1 else f"({i})*{stride}"
        for i, size, stride in zip(index, shape, contiguous_strides(shape), strict=True)
        if size != 1
    ]
    return rejoin(" + ".join(terms) or "0")


# (X/c)*c + X%c, an index split by one reshape and joined again by the next (C's / and % make it X for any X)
_OPERAND = r"(?:[^()]|\((?:[^()]|\([^()]*\))*\))+"
_REJOIN = re.compile(
    rf"(?:^|(?<=[(\[])|(?<=\+ )|(?<=, ))"  # a whole term of a sum, not a factor
    rf"\(\(({_OPERAND})\)/(\d+)\)\*\2 \+ (\()?\(\1\)%\2(?(3)\))(?=$|[)\],]| [+-])"
)


# (((X/a)%b)*a + X%a, the inner two of three or more dims merged by a reshape: X%(a*b) for any X in C too
_NESTED = re.compile(
    rf"(?:^|(?<=[(\[])|(?<=\+ )|(?<=, ))"
    rf"\(\(\(({_OPERAND})\)/(\d+)\)%(\d+)\)\*\2 \+ (\()?\(\1\)%\2(?(4)\))(?=$|[)\],]| [+-])"
)


def rejoin(expr: str) -> str:
    """``expr`` with every ``((X)/c)*c + (X)%c`` written as ``(X)`` (and ``(((X)/a)%b)*a + (X)%a`` as
    ``((X)%ab)`` on the way there): the divisions a vectorizer cannot see past."""
    while True:
        joined = _NESTED.sub(lambda m: f"(({m[1]})%{int(m[2]) * int(m[3])})", expr)
        joined = _REJOIN.sub(r"(\1)", joined)
        if joined == expr:
            return expr
        expr = joined
