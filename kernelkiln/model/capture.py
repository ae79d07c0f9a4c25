"""Capture a whole model as one ATen graph through ``torch.export``, the model's own weights kept.

Decomposed to core ATen as the lowering needs, except the fused ops the model really runs
(scaled dot-product attention): a region's reference is what the model executes, not an
unfused formula that would make any kernel look fast. Parameters and buffers stay
placeholders read from the user's module at each call, so nothing is copied and a tied
weight (GPT-2's ``lm_head`` and ``wte``) stays one tensor.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.export.graph_signature import InputKind
from torch.utils._pytree import TreeSpec

from kernelkiln.errors import UserError, described

# The ops a model runs fused that the decomposition table would spell out in pieces.
KEPT = ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu")


@dataclass(frozen=True)
class Captured:
    """A model's ATen graph at its example inputs: which placeholder is which of the model's own tensors.

    From ``torch.export`` (``capture``), or the graph a ``torch.compile`` backend is handed
    (``state`` then empty: the weights arrive as arguments, and ``out_spec`` None).
    """

    module: torch.fx.GraphModule
    state: dict[str, str]  # placeholder name -> the model's parameter, buffer or constant (its FQN)
    kinds: dict[str, str]  # placeholder name -> "parameter" | "buffer" | "constant" | "input"
    example: tuple[Any, ...]
    constants: dict[str, Any] = field(default_factory=dict)  # lifted constants, by FQN
    out_spec: TreeSpec | None = None  # how the flat outputs make the model's output

    @property
    def graph(self) -> torch.fx.Graph:
        return self.module.graph

    def state_tensors(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """Each state placeholder's tensor, the model's own object (never a copy)."""
        own: dict[str, torch.Tensor] = dict(model.named_parameters(remove_duplicate=False))
        own.update(model.named_buffers(remove_duplicate=False))
        out = {}
        for name, fqn in self.state.items():
            tensor = own.get(fqn)
            if tensor is None:
                tensor = self.constants[fqn]  # lifted constants are tensors
            out[name] = tensor
        return out


def decompositions() -> dict[Any, Any]:
    """The decomposition table to core ATen, less the fused ops the model runs (``KEPT``)."""
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if any(str(op).startswith(f"aten.{k}.") for k in KEPT):
            del table[op]
    return dict(table)


class ExportFailed(UserError):
    """``torch.export`` could not capture the model (dynamo may, graph by graph: ``model.dynamo``)."""


def _cache(exc: BaseException) -> str:
    """Why a model returning a key-value cache cannot be captured, and the fix; "" for any other failure."""
    text = described(exc)
    if "DynamicCache" in text or ("Cache" in text and "pytree" in str(exc)):
        return (
            "the model returns a key-value cache, which torch.export cannot capture: build it with "
            "use_cache=False (a Hugging Face config's `use_cache`)"
        )
    return ""


def capture(model: torch.nn.Module, example: tuple[Any, ...]) -> Captured:
    """``model``'s graph at ``example`` (export, then core ATen less ``KEPT``); one-line ``UserError`` if it fails."""
    model.eval()
    try:
        with torch.no_grad():
            program = torch.export.export(model, tuple(example), strict=False)
        program = program.run_decompositions(decompositions())
    except Exception as exc:
        if _cache(exc):
            raise UserError(_cache(exc)) from None
        raise ExportFailed(f"torch.export could not capture the model ({described(exc)[:300]})") from None
    kinds, state = {}, {}
    names = {
        InputKind.PARAMETER: "parameter",
        InputKind.BUFFER: "buffer",
        InputKind.CONSTANT_TENSOR: "constant",
        InputKind.USER_INPUT: "input",
    }
    for spec in program.graph_signature.input_specs:
        kind = names.get(spec.kind)
        if kind is None:
            raise UserError(
                f"the captured model takes a {spec.kind.name.lower()} input, which kiln model cannot splice"
            )
        name = spec.arg.name  # every kind above is a tensor argument
        kinds[name] = kind
        if kind != "input":
            state[name] = str(spec.target)
    constants = dict(program.constants)
    return Captured(program.graph_module, state, kinds, tuple(example), constants, program.call_spec.out_spec)
