"""Capture a whole model as one ATen graph through ``torch.export``, the model's own weights kept.

Decomposed to core ATen as the lowering needs, except the fused ops the model really runs
(scaled dot-product attention): a region's reference is what the model executes, not an
unfused formula that would make any kernel look fast. Parameters and buffers stay
placeholders read from the user's module at each call, so nothing is copied and a tied
weight (GPT-2's ``lm_head`` and ``wte``) stays one tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from kernelkiln.errors import UserError, described

# The ops a model runs fused that the decomposition table would spell out in pieces.
KEPT = ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu")


@dataclass(frozen=True)
class Captured:
    """A model's graph at its example inputs: which placeholder is which of the model's own tensors."""

    program: ExportedProgram
    state: dict[str, str]  # placeholder name -> the model's parameter, buffer or constant (its FQN)
    kinds: dict[str, str]  # placeholder name -> "parameter" | "buffer" | "constant" | "input"
    example: tuple[Any, ...]

    @property
    def graph(self) -> torch.fx.Graph:
        return self.program.graph_module.graph

    def state_tensors(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """Each state placeholder's tensor, the model's own object (never a copy)."""
        own: dict[str, torch.Tensor] = dict(model.named_parameters(remove_duplicate=False))
        own.update(model.named_buffers(remove_duplicate=False))
        out = {}
        for name, fqn in self.state.items():
            tensor = own.get(fqn)
            if tensor is None:
                tensor = self.program.constants[fqn]  # lifted constants are tensors
            out[name] = tensor
        return out


def _refusal(exc: BaseException) -> str:
    text = described(exc)
    if "DynamicCache" in text or ("Cache" in text and "pytree" in str(exc)):
        return (
            "the model returns a key-value cache, which torch.export cannot capture: build it with "
            "use_cache=False (a Hugging Face config's `use_cache`)"
        )
    return f"torch.export could not capture the model ({text[:300]})"


def capture(model: torch.nn.Module, example: tuple[Any, ...]) -> Captured:
    """``model``'s graph at ``example`` (export, then core ATen less ``KEPT``); one-line ``UserError`` if it fails."""
    model.eval()
    try:
        with torch.no_grad():
            program = torch.export.export(model, tuple(example), strict=False)
        table = torch.export.default_decompositions()
        for op in list(table.keys()):
            if any(str(op).startswith(f"aten.{k}.") for k in KEPT):
                del table[op]
        program = program.run_decompositions(table)
    except Exception as exc:
        raise UserError(_refusal(exc)) from None
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
    return Captured(program, state, kinds, tuple(example))
