"""Splice winning kernels back into the captured graph as ``torch.library`` custom ops.

Each task gets one op, ``kiln::region_<key>(int place, Tensor[] inputs, Tensor[] state) ->
Tensor[]``; each place the region occurs in the model calls it with its own weights. The
op runs the task's best candidate (its ``ModelNew``, built on the meta device and then
given the model's own tensors, so no weight is copied or drawn at random). With a fake
implementation registered, ``torch.compile`` and ``torch.export`` see a clean graph.
"""

from __future__ import annotations

import itertools
import operator
import threading
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn

from kernelkiln.model.capture import Captured
from kernelkiln.model.regions import Region

_LOCK = threading.Lock()
_OPS: dict[str, object] = {}  # task key -> its custom op (registered once per process)
_PLACES: dict[int, Place] = {}  # a place's number -> the bound candidate
_NUMBERS = itertools.count()
_LIBRARY: torch.library.Library | None = None  # the kiln namespace's ops, made at the first splice
_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default)


class SpliceError(Exception):
    """A candidate that cannot run on the model's own tensors (one line)."""


@dataclass(frozen=True)
class Kernel:
    """A task's winning candidate: its source and the key of the regions it serves."""

    key: str
    source: str
    origin: str  # "generated" (kernelkiln's lowering, knobs tuned) or "model-written"


class Place:
    """One place of a region in the model: its candidate module, bound to the model's tensors at first call."""

    def __init__(
        self, kernel: Kernel, module: types.ModuleType, weights: int, outputs: list[tuple[tuple[int, ...], torch.dtype]]
    ):
        self.kernel = kernel
        self.module = module
        self.weights = weights  # how many of the state tensors are weights; the rest are constants
        self.outputs = outputs  # shapes and dtypes, for the op's fake implementation (a place has one shape)
        self.bound: nn.Module | None = None
        self.state: list[torch.Tensor] = []  # the tensors ``bound`` holds
        self.lock = threading.Lock()

    def __call__(self, inputs: Sequence[torch.Tensor], state: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        # Bound again when handed other tensors (a compiled graph takes the weights as arguments: a parameter
        # the user replaced arrives as a new tensor). Compared by memory, not identity: a compiled graph hands
        # the same weights as new tensor objects at every call, and the ones held keep that memory alive.
        if self.bound is None or any(not _same(a, b) for a, b in zip(state, self.state, strict=True)):
            with self.lock:
                self.bound = _bind(self.module, state[: self.weights], state[self.weights :])
                self.state = list(state)
        out = self.bound(*inputs)
        return list(out) if isinstance(out, (tuple, list)) else [out]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same values in the same memory: one tensor, or another object viewing it alike."""
    return a is b or (
        a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype
    )


def load(kernel: Kernel) -> types.ModuleType:
    """The candidate's module, executed in this process (its native code compiled or taken from the cache)."""
    module = types.ModuleType(f"kiln_region_{kernel.key}")
    exec(compile(kernel.source, f"<kiln region {kernel.key}>", "exec"), module.__dict__)  # our own code
    if not isinstance(getattr(module, "ModelNew", None), type):
        raise SpliceError("the candidate defines no ModelNew class")
    return module


def _bind(module: types.ModuleType, weights: Sequence[torch.Tensor], constants: Sequence[torch.Tensor]) -> nn.Module:
    """``ModelNew`` built on the meta device, its ``wK`` and ``cK`` tensors replaced by the model's own."""
    with torch.device("meta"):
        new = module.ModelNew(*[torch.empty_like(c, device="meta") for c in constants])
    own = {f"w{k}": t for k, t in enumerate(weights)} | {f"c{k}": t for k, t in enumerate(constants)}
    for owner in new.modules():
        for name in list(owner._parameters):
            if name in own:
                t = own[name]
                owner._parameters[name] = t if isinstance(t, nn.Parameter) else nn.Parameter(t, requires_grad=False)
        for name in list(owner._buffers):
            if name in own:
                owner._buffers[name] = own[name]
    stale = [n for n, t in [*new.named_parameters(), *new.named_buffers()] if t.is_meta]
    if stale:
        raise SpliceError(f"the candidate holds tensors of its own that are not the model's: {', '.join(stale[:3])}")
    return new


def state_order(region: Region) -> list[fx.Node]:
    """The op's ``state`` list: the weights (``wK``), then the constants (``cK``), numbered as in the task."""
    return [*region.state, *region.constants]


def _fake(place: int, inputs: list[torch.Tensor], state: list[torch.Tensor]) -> list[torch.Tensor]:
    return [torch.empty(shape, dtype=dtype) for shape, dtype in _PLACES[place].outputs]


def _op(key: str) -> object:
    # Defined through torch.library.Library rather than @custom_op: inference needs no autograd wrapper, and
    # custom_op's Python layers cost ~10 us a call against ~2.6 us here (measured), paid per region per call.
    global _LIBRARY
    with _LOCK:
        if key in _OPS:
            return _OPS[key]
        if _LIBRARY is None:
            _LIBRARY = torch.library.Library("kiln", "FRAGMENT")
        name = f"region_{key}"
        _LIBRARY.define(f"{name}(int place, Tensor[] inputs, Tensor[] state) -> Tensor[]")
        _LIBRARY.impl(name, run_place, "CompositeExplicitAutograd")
        torch.library.register_fake(f"kiln::{name}", _fake, lib=_LIBRARY)
        _OPS[key] = getattr(torch.ops.kiln, name).default
        return _OPS[key]


def splice(captured: Captured, regions: dict[str, list[Region]], kernels: dict[str, Kernel]) -> fx.GraphModule:
    """A copy of the captured graph with every region of each kernel's key replaced by its op."""
    copied: dict[fx.Node, fx.Node] = {}
    gm = fx.GraphModule(captured.module, _copy(captured.graph, copied))
    # By the captured node's name: the copy may rename a node (a placeholder `input` becomes `input_1`).
    by_name = {n.name: c for n, c in copied.items()}
    modules = {key: load(kernel) for key, kernel in kernels.items()}
    for key, kernel in kernels.items():
        for region in regions[key]:
            outputs = [(tuple(int(s) for s in o.meta["val"].shape), o.meta["val"].dtype) for o in region.outputs]
            number = next(_NUMBERS)
            _PLACES[number] = Place(kernel, modules[key], len(region.state), outputs)
            _replace(gm.graph, by_name, region, _op(key), number)
    for n in gm.graph.nodes:
        # A kernel's outputs are contiguous where the model's were views with other strides (attention's
        # inputs, split from one product): a view downstream, of them or of what torch makes from them,
        # may no longer apply. A reshape is the same view where one exists and a copy where not.
        if n.target in _VIEWS:
            n.target = torch.ops.aten.reshape.default
    _fold_constants(gm)
    gm.graph.eliminate_dead_code()
    gm.graph.lint()
    gm.recompile()
    return gm


def _fold_constants(gm: fx.GraphModule) -> None:
    """Values that read neither inputs nor weights (a causal mask from ``arange``), computed once.

    The graph is specialized to the captured shapes, so such a value is the same at every
    call; an op that draws random numbers is never folded.
    """
    constant: dict[fx.Node, Any] = {}
    for n in gm.graph.nodes:
        if n.op != "call_function" or not all(a in constant for a in n.all_input_nodes):
            continue
        if isinstance(n.target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in n.target.tags:
            continue
        if isinstance(n.target, torch._ops.OpOverload) and n.target.namespace == "kiln":
            continue
        args = fx.node.map_arg(n.args, lambda a: constant[a])
        kwargs = fx.node.map_arg(n.kwargs, lambda a: constant[a])
        constant[n] = n.target(*args, **kwargs)
    frontier = [
        n for n in constant if isinstance(constant[n], torch.Tensor) and any(u not in constant for u in n.users)
    ]
    for k, n in enumerate(frontier):
        name = f"kiln_constant_{k}"
        gm.register_buffer(name, constant[n], persistent=False)
        with gm.graph.inserting_before(n):
            n.replace_all_uses_with(gm.graph.get_attr(name), delete_user_cb=lambda u: u not in constant)


def run_place(place: int, inputs: list[torch.Tensor], state: list[torch.Tensor]) -> list[torch.Tensor]:
    """What a region's op does, called directly: the dispatcher's ~20 microseconds a call saved."""
    return _PLACES[place](inputs, state)


def direct(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy of a spliced graph calling the kernels directly (eager runs) instead of through their ops."""
    ops = set(_OPS.values())
    graph = _copy(gm.graph)
    for n in graph.nodes:
        if n.target in ops:
            n.target = run_place
    return fx.GraphModule(gm, graph)


def _copy(graph: fx.Graph, env: dict[fx.Node, fx.Node] | None = None) -> fx.Graph:
    """A copy of ``graph``; ``env`` receives each node's copy."""
    new = fx.Graph()
    env = {} if env is None else env
    out = new.graph_copy(graph, env)
    new.output(out)
    return new


def _replace(graph: fx.Graph, by_name: dict[str, fx.Node], region: Region, op: object, number: int) -> None:
    nodes = [by_name[n.name] for n in region.nodes]
    reads = [by_name[n.name] for n in region.inputs] + [by_name[n.name] for n in state_order(region)]
    order = {n: k for k, n in enumerate(graph.nodes)}
    inside = set(nodes)
    # The op goes where every value it reads exists: the region's first node, or after a value torch makes
    # later in the graph (a position embedding computed after the region's first add).
    last = max(reads, key=order.__getitem__, default=None)
    at = nodes[0] if last is None or order[last] < order[nodes[0]] else last.next
    outputs = [by_name[o.name] for o in region.outputs]
    users = [u for o in outputs for u in o.users if u not in inside]
    if any(order[u] < order[at] for u in users):
        raise SpliceError("the region's outputs are read before every value it reads is made")
    with graph.inserting_before(at):
        call = graph.call_function(
            op,  # type: ignore[arg-type]  # an OpOverload
            (number, [by_name[n.name] for n in region.inputs], [by_name[n.name] for n in state_order(region)]),
        )
        items = [graph.call_function(operator.getitem, (call, k)) for k in range(len(region.outputs))]
    for original, item in zip(region.outputs, items, strict=True):
        by_name[original.name].replace_all_uses_with(item)
        by_name[original.name] = item  # a later region reading this value reads the op's output
    for n in reversed(nodes):
        if not n.users:
            graph.erase_node(n)
