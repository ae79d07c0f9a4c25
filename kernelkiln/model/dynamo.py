"""Capture through dynamo where ``torch.export`` fails: the model's graphs, one per stretch between graph breaks.

Dynamo runs the model's Python and breaks its graph where it must (a branch on a tensor's
value); AOTAutograd lowers each graph to ATen with ``capture.decompositions()``, so its
regions render to the tasks an exported graph's would. Dynamo's graphs take the module's
parameters and buffers as arguments (named for them), which types each placeholder; the
example values are dynamo's own (the model's tensors and the inputs), real, in order.
The kernels then run under ``torch.compile`` through ``backend.Backend``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx

from kernelkiln.errors import UserError, described
from kernelkiln.model.capture import Captured, decompositions


def placeholders(gm: fx.GraphModule) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def kind(name: str, value: Any) -> str:
    """A dynamo graph argument's kind, from its name (``l_self_modules_up_parameters_weight_``) or value."""
    if isinstance(value, torch.nn.Parameter) or "_parameters_" in name:
        return "parameter"
    return "buffer" if "_buffers_" in name else "input"


def capture_graphs(model: torch.nn.Module, example: tuple[Any, ...]) -> list[Captured]:
    """``model``'s dynamo graphs at ``example``, in the order they ran, each lowered to ATen; one-line error if none."""
    graphs: list[Captured] = []

    def record(gm: fx.GraphModule, example_inputs: list[Any]) -> Any:
        from torch._dynamo.backends.common import aot_autograd

        kinds = [kind(n.name, x) for n, x in zip(placeholders(gm), example_inputs, strict=True)]
        real = tuple(example_inputs)

        def forward(aten: fx.GraphModule, inputs: list[Any]) -> Any:
            names = [n.name for n in placeholders(aten)]
            if len(names) == len(kinds):
                graphs.append(Captured(aten, {}, dict(zip(names, kinds, strict=True)), real))
            return aten

        return aot_autograd(fw_compiler=forward, decompositions=decompositions())(gm, example_inputs)

    model.eval()
    torch._dynamo.reset()  # a fresh compile: every graph goes through ``record``
    try:
        with torch.no_grad():
            torch.compile(model, backend=record, dynamic=False)(*example)
    except Exception as exc:
        raise UserError(f"neither torch.export nor dynamo could capture the model ({described(exc)[:300]})") from None
    finally:
        torch._dynamo.reset()
    if not graphs:
        raise UserError("dynamo captured no graph of the model: it runs no tensor operation torch.compile traces")
    return graphs
