"""A loop body: the statements that compute nodes at an index, each value computed once."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator

from kernelkiln.lowering.graph import (
    Concat,
    Constant,
    Gather,
    Index,
    Iota,
    Node,
    Patches,
    Pointwise,
    View,
    linear,
    promote,
)
from kernelkiln.lowering.pointwise import BOOLEAN, literal, render_calling


class NotFusable(Exception):
    """A kernel read a reduction of its own group at another row: the group must split."""

    def __init__(self, node: Node):
        super().__init__("not fusable")
        self.node = node


class Body:
    """Statements appended in order; ``value`` returns a C expression for a node at an index.

    ``buffers`` names every stored node's array; ``scalars`` holds the reductions this
    kernel computed for the current row (the kept dimensions of ``row`` index them);
    ``cached`` gives the load of a value an earlier pass of the row kept (ROWCACHE), else None.
    """

    def __init__(
        self,
        buffers: dict[int, str],
        scalars: dict[int, str] | None = None,
        row: dict[int, str] | None = None,
        indent: str = "",
        names: Iterator[int] | None = None,
        cached: Callable[[Node, Index], str | None] | None = None,
    ):
        self.buffers = buffers
        self.cached = cached
        self.scalars = scalars or {}
        self.row = row or {}
        self.lines: list[str] = []
        self.knobs: set[str] = set()  # read by the statements (VMATH, where a float exp, tanh or erf is inlined)
        self.memo: dict[tuple[int, Index], str] = {}
        self.indent = indent
        self.names = names if names is not None else itertools.count(1)  # shared by a kernel's bodies: one C scope
        self.selectors: list[str] = []  # the index each concatenation chose its part by, shared with branches

    def temp(self, ctype: str, expr: str) -> str:
        name = f"v{next(self.names)}"
        self.lines.append(f"{self.indent}const {ctype} {name} = {expr};")
        return name

    def value(self, node: Node, idx: Index) -> str:
        key = (id(node), idx)
        if key not in self.memo:
            self.memo[key] = self._compute(node, idx)
        return self.memo[key]

    def value_of(self, node: Node, idx: Index) -> str:
        """``node`` computed at ``idx`` (not read from its own buffer: this is the loop that writes it)."""
        return self._expr(node, idx)

    def load(self, node: Node, idx: Index) -> str:
        return f"{self.buffers[id(node)]}[{linear(idx, node.shape)}]"

    def _compute(self, node: Node, idx: Index) -> str:
        kept = self.cached(node, idx) if self.cached is not None else None
        if kept is not None:
            return self.temp(node.ctype, kept)
        if id(node) in self.scalars:
            if any(idx[k] != var for k, var in self.row.items()):
                raise NotFusable(node)  # another row's value: not computed in this iteration
            return self.scalars[id(node)]
        if isinstance(node, Constant):
            return literal(node.value, node.ctype)
        if id(node) in self.buffers:
            return self.temp(node.ctype, self.load(node, idx))
        return self._expr(node, idx)

    def _expr(self, node: Node, idx: Index) -> str:
        if isinstance(node, Constant):
            return literal(node.value, node.ctype)
        if isinstance(node, View):
            if node.kind == "reshape" and id(node.base) in self.buffers and id(node.base) not in self.scalars:
                # a reshape keeps the linear order of contiguous data: index the base's buffer directly
                return self.temp(node.ctype, f"{self.buffers[id(node.base)]}[{linear(idx, node.shape)}]")
            return self.value(node.base, tuple(node.where(idx)))
        if isinstance(node, Gather):
            position = self.value(node.index, idx)
            return self.value(node.base, (*idx[: node.dim], position, *idx[node.dim + 1 :]))
        if isinstance(node, Pointwise):
            return self._pointwise(node, idx)
        if isinstance(node, Concat):
            return self._concat(node, idx)
        if isinstance(node, Patches):
            return self._patches(node, idx)
        if isinstance(node, Iota):
            term = f"({idx[0]})" if node.step == 1 else f"({idx[0]}) * {literal(node.step, node.ctype)}"
            value = term if node.start == 0 else f"{literal(node.start, node.ctype)} + {term}"
            return self.temp(node.ctype, f"({node.ctype})({value})")
        raise NotFusable(node)  # a stored kind without a buffer: computed by its own kernel first

    def _pointwise(self, node: Pointwise, idx: Index) -> str:
        compute = self._compute_type(node)
        values = []
        for position, a in enumerate(node.args):
            own = node.op == "cast" or (node.op == "where" and position == 0)
            c = _constant(a)
            values.append(self.value(a, idx) if c is None else literal(c.value, a.ctype if own else compute))
        if node.op == "cast":
            cast = values
        elif node.op == "where":
            cast = [values[0]] + [_cast(v, a, compute) for v, a in zip(values[1:], node.args[1:], strict=True)]
        else:
            cast = [_cast(v, a, compute) for v, a in zip(values, node.args, strict=True)]
        expression, inlined = render_calling(node.op, cast, compute, node.params)
        if inlined:
            self.knobs.add("VMATH")
        return self.temp(node.ctype, expression)

    def _concat(self, node: Concat, idx: Index) -> str:
        """Each part in its own branch: a part is read only inside its range of ``dim``. Parts that are stored
        arrays read at one offset (a transposed convolution's phases, a stack) are one load through a pointer
        chosen by the index: a choice that does not change along a loop is hoisted out of it, and the load
        vectorizes."""
        self.selectors.append(idx[node.dim])
        picked = self._pick(node, idx)
        if picked is not None:
            return picked
        name = f"v{next(self.names)}"
        self.lines.append(f"{self.indent}{node.ctype} {name};")
        offset, d = 0, node.dim
        for k, part in enumerate(node.parts):
            size = part.shape[d]
            keyword = "if" if k == 0 else "else if"
            test = "else" if k == len(node.parts) - 1 else f"{keyword} ({idx[d]} < {offset + size})"
            self.lines.append(f"{self.indent}{test} {{")
            branch = self._branch()
            shifted = (*idx[:d], idx[d] if offset == 0 else f"({idx[d]}) - {offset}", *idx[d + 1 :])
            value = branch.value(part, shifted)
            self.lines += [*branch.lines, f"{self.indent}    {name} = {value};", f"{self.indent}}}"]
            offset += size
        return name

    def _branch(self) -> Body:
        """A body for statements inside a branch: it sees what this one computed, and adds nothing to it."""
        branch = Body(self.buffers, self.scalars, self.row, self.indent + "    ", self.names)
        branch.memo = dict(self.memo)
        branch.selectors = self.selectors
        return branch

    def _pick(self, node: Concat, idx: Index) -> str | None:
        """The concatenation as one load through a pointer its index chooses, where every part is a stored
        array read at the same offset; else None."""
        if self.cached is not None:  # a pass whose values later passes keep: each part's value is its own
            return None
        d, offset, choices, at = node.dim, 0, [], None
        for part in node.parts:
            shifted = (*idx[:d], idx[d] if offset == 0 else f"({idx[d]}) - {offset}", *idx[d + 1 :])
            load = self._stored(part, shifted) if part.ctype == node.ctype else None
            if load is None or (at is not None and load[1] != at):
                return None
            at = load[1]
            choices.append((offset + part.shape[d], load[0]))
            offset += part.shape[d]
        chosen = choices[-1][1]
        for end, buffer in reversed(choices[:-1]):
            chosen = f"({idx[d]}) < {end} ? {buffer} : {chosen}"
        pointer = f"v{next(self.names)}"
        self.lines.append(f"{self.indent}const {node.ctype}* {pointer} = {chosen};")
        return self.temp(node.ctype, f"{pointer}[{at}]")

    def _stored(self, node: Node, idx: Index) -> tuple[str, str] | None:
        """``(array, offset)`` of ``node`` at ``idx`` where it is a stored array read through views, else None."""
        while id(node) not in self.buffers:
            if not isinstance(node, View):
                return None
            if node.kind == "reshape" and id(node.base) in self.buffers:  # read as ``_expr`` reads it
                return self._array(node.base, linear(idx, node.shape))
            idx, node = tuple(node.where(idx)), node.base
        return self._array(node, linear(idx, node.shape))

    def _array(self, node: Node, offset: str) -> tuple[str, str] | None:
        """``node``'s array at ``offset``, unless it is a reduction this kernel holds as a scalar (a view keeps its
        base's type: only the concatenation's parts are compared with it)."""
        return None if id(node) in self.scalars else (self.buffers[id(node)], offset)

    def _patches(self, node: Patches, idx: Index) -> str:
        """The input element under kernel tap k at output o (each of r dims); 0 outside the input."""
        r = node.rank
        taps, outs = idx[2 : 2 + r], idx[2 + r :]
        spread = [
            self.temp("int64_t", f"({o}) * {s} - ({p}) + ({k}) * {d}")
            for o, k, s, p, d in zip(outs, taps, node.stride, node.padding, node.dilation, strict=True)
        ]
        at = (idx[0], idx[1], *spread)
        if node.always_inside():
            return self.value(node.base, at)
        tests = [f"{y} >= 0 && {y} < {e}" for y, e in zip(spread, node.base.shape[2:], strict=True)]
        name = f"v{next(self.names)}"
        self.lines.append(f"{self.indent}{node.ctype} {name} = 0;")
        self.lines.append(f"{self.indent}if ({' && '.join(tests)}) {{")
        branch = self._branch()
        value = branch.value(node.base, at)
        self.lines += [*branch.lines, f"{self.indent}    {name} = {value};", f"{self.indent}}}"]
        return name

    @staticmethod
    def _compute_type(node: Pointwise) -> str:
        if node.op not in BOOLEAN:
            return node.ctype
        tensors = [a.ctype for a in node.args if _constant(a) is None]
        if any(isinstance(c.value, float) for a in node.args if (c := _constant(a)) is not None):
            tensors.append("float")  # an integer tensor compared with 0.5 compares as float, as in torch
        return promote(*tensors)


_DECLARED = re.compile(r"^\s*(?:const )?\w+(?: ?\*)? ?(v\d+)(?: =|;)")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def invariant(lines: list[str], varying: set[str]) -> tuple[list[str], list[str]]:
    """A body's statements split into those that read no name in ``varying`` (nor a value computed from one),
    which can run before the loop over those names, and the rest, in order. Only whole statements of the
    body's own scope move: a branch's statements stay in it."""
    varying, fixed, rest = set(varying), [], []
    for line in lines:
        declared = _DECLARED.match(line)
        whole = line.startswith("const ") and line.endswith(";") and declared is not None
        if whole and not varying & set(_NAME.findall(line.split(" = ", 1)[1])):
            fixed.append(line)
            continue
        rest.append(line)
        if declared is not None:
            varying.add(declared[1])
    return fixed, rest


def _constant(node: Node) -> Constant | None:
    while isinstance(node, View):
        node = node.base
    return node if isinstance(node, Constant) else None


def _cast(value: str, arg: Node, want: str) -> str:
    return value if arg.ctype == want or _constant(arg) is not None else f"(({want}){value})"
