"""The user's model running spliced kernels: the rewritten graph over the model's own weights.

Inference only (it runs under ``torch.no_grad``). Run eagerly, the graph calls the kernels
directly; under ``torch.compile`` it calls their custom ops, which the compiler keeps whole.
The graph was captured at the example inputs' shapes; a call with other shapes or dtypes
runs the user's module as it is, is counted in ``fallbacks`` and is said once on stderr.
"""

from __future__ import annotations

import sys
from typing import Any

import torch
import torch.fx as fx
import torch.nn as nn
from torch.utils import _pytree as pytree

from kernelkiln.model.capture import Captured
from kernelkiln.model.splice import direct


def _signature(leaves: list[Any]) -> tuple[Any, ...]:
    return tuple((tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x for x in leaves)


class SplicedModel(nn.Module):
    """``model`` with its captured graph's regions replaced by kernels; weights stay ``model``'s own."""

    def __init__(self, model: nn.Module, captured: Captured, graph: fx.GraphModule | None):
        """``graph`` None: no kernel was kept and every call runs ``model`` as it is."""
        super().__init__()
        self.model = model  # a submodule: its parameters are this module's, shared
        self.graph = graph  # through the custom ops
        self.eager = direct(graph) if graph is not None else None
        self.captured = captured
        # The model's own tensors, in the graph's order (a load_state_dict copies into these same tensors).
        tensors = captured.state_tensors(model)
        self.state = [tensors[n.name] for n in captured.graph.nodes if n.op == "placeholder" and n.name in tensors]
        leaves, self._spec = pytree.tree_flatten((tuple(captured.example), {}))
        self._shapes = _signature(leaves)
        self._out_spec = captured.program.call_spec.out_spec  # read here: torch.compile cannot trace call_spec
        self.fallbacks = 0
        self._said = False

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self.graph is None or self.eager is None:
            return self.model(*args, **kwargs)
        leaves, spec = pytree.tree_flatten((args, kwargs))
        if spec != self._spec or _signature(leaves) != self._shapes:
            self.fallbacks += 1
            if not self._said:
                self._said = True
                print(
                    f"kiln: inputs {_signature(leaves)} differ from the captured {self._shapes}: "
                    "running the model in torch for these (counted in .fallbacks)",
                    file=sys.stderr,
                )
            return self.model(*args, **kwargs)
        graph = self.graph if torch.compiler.is_compiling() else self.eager
        with torch.no_grad():
            out = graph(*self.state, *leaves)
        return pytree.tree_unflatten(list(out), self._out_spec)
