"""Cut a captured graph into regions: what the lowering fuses into one task.

A region starts at a product (a matrix product, a convolution, attention) and takes the
operations after it up to the next product: its epilogue, the row groups (a norm, a
softmax) and elementwise chains between. An operation the lowering has no handler for
ends the region before it and stays in torch (``Left``, with the reason). Nodes that
read only the model's weights (a weight's transpose) join the region that consumes them;
nodes that read neither inputs nor weights (a causal mask built from ``arange``) are the
region's constants, built once when its task's module is made.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch.fx as fx

from kernelkiln.lowering.trace import lowers, op_name
from kernelkiln.model.capture import KEPT, Captured

PRODUCTS = frozenset({"mm", "addmm", "bmm", "baddbmm", "convolution", *KEPT})
# Operations that compute nothing (views and copies): a region of these alone is left in torch.
MOVES = frozenset(
    {
        "view", "_unsafe_view", "reshape", "permute", "transpose", "t", "expand", "slice", "select", "squeeze",
        "unsqueeze", "alias", "clone", "split", "split_with_sizes", "unbind", "as_strided", "detach", "getitem",
    }
)  # fmt: skip
# Checks the export leaves in the graph: they compute nothing and no value reads them.
_CHECKS = ("_assert",)


@dataclass(frozen=True)
class Region:
    """Graph nodes one task computes, and what it reads from the rest of the graph."""

    index: int
    nodes: tuple[fx.Node, ...]  # in graph order
    pulled: tuple[fx.Node, ...]  # weight-only nodes it recomputes (a transpose of a weight), in graph order
    inputs: tuple[fx.Node, ...]  # activations (the task's forward inputs)
    state: tuple[fx.Node, ...]  # the model's parameters, buffers and constants (the task's parameters)
    constants: tuple[fx.Node, ...]  # values of neither: built once (the task's buffers)
    outputs: tuple[fx.Node, ...]

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(op_name(n.target) for n in self.nodes if n.target is not operator.getitem)


@dataclass(frozen=True)
class Left:
    """A node that stays in torch, and why."""

    node: fx.Node
    reason: str


@dataclass(frozen=True)
class Partition:
    regions: tuple[Region, ...]
    left: tuple[Left, ...]


def _dependencies(captured: Captured) -> tuple[set[fx.Node], set[fx.Node]]:
    """(nodes reading a model input, nodes reading the model's state), transitively."""
    on_input: set[fx.Node] = set()
    on_state: set[fx.Node] = set()
    for n in captured.graph.nodes:
        if n.op == "placeholder":
            (on_input if captured.kinds[n.name] == "input" else on_state).add(n)
            continue
        if any(a in on_input for a in n.all_input_nodes):
            on_input.add(n)
        if any(a in on_state for a in n.all_input_nodes):
            on_state.add(n)
    return on_input, on_state


def _is_check(n: fx.Node) -> bool:
    return n.op == "call_function" and op_name(n.target).startswith(_CHECKS) and not n.users


def partition(captured: Captured) -> Partition:
    """The regions of ``captured`` in graph order, and the nodes left in torch."""
    on_input, on_state = _dependencies(captured)
    groups: list[list[fx.Node]] = []
    left: list[Left] = []
    home: dict[fx.Node, int | None] = {}  # node -> its group (None: left in torch)
    current: list[fx.Node] = []

    def close() -> None:
        nonlocal current
        if current:
            groups.append(current)
        current = []

    for n in captured.graph.nodes:
        if n.op != "call_function" or n not in on_input or _is_check(n):
            continue
        if n.target is operator.getitem:  # a tuple's item lives where the tuple was made
            source = n.args[0]
            where = home.get(source) if isinstance(source, fx.Node) else None
            if where is None:
                left.append(Left(n, "an item of an operation left in torch"))
            elif where < len(groups):
                groups[where].append(n)
            else:
                current.append(n)
            home[n] = where
            continue
        name = op_name(n.target)
        if not lowers(name) and name not in KEPT:
            close()
            left.append(Left(n, f"no lowering yet for aten.{name}"))
            home[n] = None
            continue
        if name in PRODUCTS:
            close()
        current.append(n)
        home[n] = len(groups)
    close()
    regions: list[Region] = []
    for nodes in groups:
        ops = {op_name(n.target) for n in nodes}
        if ops <= MOVES:
            left += [Left(n, "moves data only (views and copies): nothing to compute") for n in nodes]
            continue
        regions.append(_region(len(regions), nodes, on_input, on_state))
    return Partition(tuple(regions), tuple(left))


def _region(index: int, nodes: list[fx.Node], on_input: set[fx.Node], on_state: set[fx.Node]) -> Region:
    inside = set(nodes)
    pulled: set[fx.Node] = set()
    inputs: dict[fx.Node, None] = {}
    state: dict[fx.Node, None] = {}
    constants: dict[fx.Node, None] = {}

    def read(a: fx.Node) -> None:
        if a in inside or a in pulled:
            return
        if a.op == "placeholder":
            (inputs if a in on_input else state)[a] = None
        elif a in on_input:
            inputs[a] = None
        elif a in on_state and lowers(op_name(a.target)):
            pulled.add(a)  # computed from weights alone (a transpose): recomputed inside, from the weights
            for b in a.all_input_nodes:
                read(b)
        elif a in on_state:
            # Made from weights by an op the lowering lacks (an embedding of positions): torch computes it at
            # every call, so the kernel reads it as an input. As state it would be bound once, to the first
            # call's tensor, and go stale when the weights change.
            inputs[a] = None
        else:
            constants[a] = None

    for n in nodes:
        for a in n.all_input_nodes:
            read(a)
    outputs = tuple(n for n in nodes if "val" in n.meta and _tensor(n) and any(u not in inside for u in n.users))
    order = {n: k for k, n in enumerate(nodes[0].graph.nodes)}
    return Region(
        index,
        tuple(nodes),
        tuple(sorted(pulled, key=order.__getitem__)),
        tuple(inputs),
        tuple(state),
        tuple(constants),
        outputs,
    )


def _tensor(n: fx.Node) -> bool:
    import torch

    return isinstance(n.meta.get("val"), torch.Tensor)
