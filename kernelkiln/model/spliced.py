"""The user's model running spliced kernels: a rewritten graph per declared shape, over the model's own weights.

Inference only (it runs under ``torch.no_grad``). Run eagerly, a graph calls the kernels
directly; under ``torch.compile`` it calls their custom ops, which the compiler keeps whole.
Each graph was captured at one declared shape; a call with inputs of another shape or
dtype runs the user's module as it is, is counted in ``fallbacks`` and is said once on
stderr. A declared shape whose graph is None (its kernels were dropped) runs the module too.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
from torch.utils import _pytree as pytree

from kernelkiln.model.capture import Captured
from kernelkiln.model.splice import direct


def _signature(leaves: list[Any]) -> tuple[Any, ...]:
    return tuple((tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x for x in leaves)


class _Shape:
    """One declared shape: its spliced graph (through the ops, and direct), the state it reads, its output's form."""

    def __init__(self, model: nn.Module, captured: Captured, graph: fx.GraphModule | None):
        self.graph = graph
        self.eager = direct(graph) if graph is not None else None
        # The model's own tensors, in the graph's order (a load_state_dict copies into these same tensors).
        tensors = captured.state_tensors(model)
        self.state = [tensors[n.name] for n in captured.graph.nodes if n.op == "placeholder" and n.name in tensors]
        leaves, self.spec = pytree.tree_flatten((tuple(captured.example), {}))
        self.signature = _signature(leaves)
        self.out_spec = captured.out_spec


class SplicedModel(nn.Module):
    """``model`` with its captured graphs' regions replaced by kernels; weights stay ``model``'s own."""

    def __init__(self, model: nn.Module, shapes: Sequence[tuple[Captured, fx.GraphModule | None]]):
        """``shapes``: each declared shape's capture and spliced graph (None: that shape runs ``model``)."""
        super().__init__()
        self.model = model  # a submodule: its parameters are this module's, shared
        self._shapes = [_Shape(model, captured, graph) for captured, graph in shapes]
        self.fallbacks = 0
        self._said = False

    @property
    def graphs(self) -> list[fx.GraphModule | None]:
        """Each declared shape's graph, through the custom ops (None where the shape runs in torch)."""
        return [s.graph for s in self._shapes]

    @property
    def graph(self) -> fx.GraphModule | None:
        """The graph of the only declared shape (None: no kernel kept)."""
        if len(self._shapes) != 1:
            raise ValueError(f"this model has a graph per declared shape ({len(self._shapes)}): read .graphs")
        return self._shapes[0].graph

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        leaves, spec = pytree.tree_flatten((args, kwargs))
        signature = _signature(leaves)
        shape = None
        for declared in self._shapes:
            if declared.spec == spec and declared.signature == signature:
                shape = declared
                break
        if shape is None:
            self.fallbacks += 1
            if not self._said:
                self._said = True
                shapes = "; ".join(str(s.signature) for s in self._shapes)
                print(
                    f"kiln: inputs {signature} are not a declared shape ({shapes}): running the model in torch "
                    "for these (counted in .fallbacks)",
                    file=sys.stderr,
                )
            return self.model(*args, **kwargs)
        if shape.graph is None or shape.eager is None:
            return self.model(*args, **kwargs)
        graph = shape.graph if torch.compiler.is_compiling() else shape.eager
        with torch.no_grad():
            out = graph(*shape.state, *leaves)
        if shape.out_spec is None:
            return list(out)
        return pytree.tree_unflatten(list(out), shape.out_spec)
