"""Trace a task's reference, at one workload's real inputs, into the lowering's graph.

``make_fx`` records the ATen operations the reference runs (functionalized, so in-place
updates become values, with ATen's core decompositions); each becomes graph nodes
through ``aten.HANDLERS``. Parameters and buffers become inputs, named so the candidate
can pass the module's own tensors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from kernelkiln.lowering import aten_composite, aten_index, aten_matmul, aten_ops  # noqa: F401  (they register the handlers)
from kernelkiln.lowering.aten import HANDLERS, Unusable, ctype_of, node
from kernelkiln.lowering.aten_recurrence import recurrent_layers
from kernelkiln.lowering.graph import Constant, Graph, Input, Node, Unsupported, topological
from kernelkiln.task.model import Task, Workload

_PLUMBING = frozenset({"getitem", "output", "placeholder"})
# Random draws in forward (an LSTM's initial state from torch.randn): the candidate makes the same draws, in the
# same order, from torch's global generator, and passes them to its kernel as inputs; the guard runs reference
# and candidate from the same generator state.
DRAWS = frozenset({"randn", "rand"})


@dataclass(frozen=True)
class Traced:
    """One workload's graph and what the candidate passes for each of its inputs."""

    graph: Graph
    tensors: list[str]  # per graph input: "param:NAME" (a parameter or buffer), "input:K" (forward's k-th tensor)
    # or "draw:OP" (torch.OP's draw in forward, after the inputs)
    input_shapes: list[tuple[int, ...]]
    input_dtypes: list[str]
    output_shapes: list[tuple[int, ...]]
    single: bool  # forward returns one tensor, not a tuple
    key: tuple[Any, ...] = ()  # forward's arguments as the candidate dispatches on them: a shape or a scalar's value


def op_name(target: Any) -> str:
    """``aten.add.Tensor`` as ``add``; ``aten.relu_.default`` as ``relu_``; ``kernelkiln.recurrence.default``
    as ``recurrence``."""
    text = str(target)
    if text.startswith("<built-in function"):
        return text.split()[-1].rstrip(">")
    parts = text.split(".")
    return parts[1] if parts[0] in ("aten", "prims", "kernelkiln") and len(parts) > 1 else parts[0]


def trace(task: Task, workload: Workload, seed: int = 0) -> Traced:
    """The reference's graph at ``workload`` (raises ``Unsupported`` naming what does not lower)."""
    from torch._decomp import core_aten_decompositions
    from torch.func import functional_call, functionalize
    from torch.fx.experimental.proxy_tensor import make_fx

    model = task.make_model(workload, seed)
    inputs = task.make_inputs(workload, seed)
    for x in inputs:
        if not isinstance(x, (torch.Tensor, bool, int, float)):
            raise Unsupported(f"forward takes a {type(x).__name__}, not only tensors and numbers")
    # a number among forward's arguments is traced as the constant it is (the candidate dispatches on its value)
    arguments = [k for k, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
    key = tuple(tuple(int(s) for s in x.shape) if isinstance(x, torch.Tensor) else x for x in inputs)
    attributes = _as_buffers(model)
    named: dict[str, torch.Tensor] = dict(model.named_parameters())
    named.update(model.named_buffers())
    names = list(named)

    def run(*flat: torch.Tensor) -> Any:
        state = dict(zip(names, flat[: len(names)], strict=True))
        args = list(inputs)
        for k, t in zip(arguments, flat[len(names) :], strict=True):
            args[k] = t
        with recurrent_layers():
            return functional_call(model, state, tuple(args))

    flat = [t.detach() for t in named.values()] + [inputs[k].detach() for k in arguments]
    try:
        # without oneDNN an LSTM records its cells' products and activations, not aten.mkldnn_rnn_layer
        with torch.no_grad(), warnings.catch_warnings(), _without_mkldnn(torch):
            gm = make_fx(
                functionalize(run, remove="mutations_and_views"),
                decomposition_table=core_aten_decompositions(),  # type: ignore[arg-type]  # a Mapping at run time
            )(*flat)
    except Unsupported:
        raise
    except Exception as exc:
        raise Unsupported(f"tracing the reference failed: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    tensors = [f"{'attr' if n in attributes else 'param'}:{n}" for n in names]
    tensors += [f"input:{k}" for k in range(len(arguments))]
    return dataclasses.replace(_translate(gm, tensors, flat), key=key)


@contextlib.contextmanager
def _without_mkldnn(torch: Any) -> Iterator[None]:
    warnings.simplefilter("ignore")  # setting the flags warns about TF32 on Intel GPUs
    with torch.backends.mkldnn.flags(enabled=False):
        yield


_CONSTANT = (
    "the reference reads a tensor of more than one element that is neither a parameter nor a buffer (an "
    "attribute, or a mask made while tracing such as is_causal=True): register it with register_buffer"
)


def _as_buffers(model: torch.nn.Module) -> set[str]:
    """Make the model's plain tensor attributes buffers, so the trace sees them as inputs; their names."""
    names = set()
    for prefix, module in model.named_modules():
        for name, value in list(vars(module).items()):
            if isinstance(value, torch.Tensor) and value.numel() != 1:  # one element: traced as its number
                del module.__dict__[name]
                module.register_buffer(name, value, persistent=False)
                names.add(f"{prefix}.{name}" if prefix else name)
    return names


def _translate(gm: Any, tensors: list[str], flat: list[torch.Tensor]) -> Traced:
    tensors, flat = list(tensors), list(flat)  # a draw in forward adds to both
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    constants = {n: getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"}
    if any(t.numel() != 1 for t in constants.values()):
        raise Unsupported(_CONSTANT)
    missing = sorted(
        {
            op_name(n.target)
            for n in calls
            if _handler_name(n) not in HANDLERS and op_name(n.target) not in _PLUMBING | DRAWS
        }
    )
    if missing:
        raise Unsupported("no lowering yet for " + ", ".join(f"aten.{m}" for m in missing))
    # a one-element tensor made inside forward (torch.tensor(self.value)) is the number it holds
    env: dict[Any, Any] = {n: Constant(tuple(t.shape), ctype_of(t.dtype), value=t.item()) for n, t in constants.items()}
    inputs: list[Input] = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for k, (ph, t) in enumerate(zip(placeholders, flat, strict=True)):
        inputs.append(Input(tuple(int(s) for s in t.shape), ctype_of(t.dtype), position=k, name=tensors[k]))
        env[ph] = inputs[-1]
    outputs: list[Node] = []
    single = True
    for fx in gm.graph.nodes:
        if fx.op == "call_function" and op_name(fx.target) in DRAWS:
            env[fx] = _drawn(fx, len(inputs))
            inputs.append(env[fx])
            tensors.append(f"draw:{op_name(fx.target)}")
            flat.append(fx.meta["val"])
        elif fx.op == "call_function":
            env[fx] = _call(fx, env, placeholders)
        elif fx.op == "output":
            result = fx.args[0]
            single = not isinstance(result, (tuple, list))
            for item in [result] if single else result:
                if item not in env:
                    raise Unsupported(f"forward returns a {type(item).__name__}, not only tensors")
                outputs.append(node(env[item]))
    # a tensor attribute the reference overwrites before reading it (VanillaRNN's hidden state) is never passed
    read = {id(n) for n in topological(outputs)}
    kept = [k for k, i in enumerate(inputs) if not (i.name.startswith("attr:") and id(i) not in read)]
    if any(inputs[k].name.startswith("attr:") for k in kept):
        raise Unsupported(_CONSTANT)
    inputs, tensors, flat = [inputs[k] for k in kept], [tensors[k] for k in kept], [flat[k] for k in kept]
    for k, i in enumerate(inputs):
        i.position = k
    ops = [op_name(n.target) for n in calls if op_name(n.target) not in _PLUMBING]
    graph = Graph(inputs=inputs, outputs=outputs, ops=ops)
    return Traced(
        graph,
        tensors,
        [i.shape for i in inputs],
        [str(t.dtype).removeprefix("torch.") for t in flat],
        [o.shape for o in outputs],
        single,
    )


def _drawn(fx: Any, position: int) -> Input:
    """A random draw in forward as the kernel's ``position``-th input (the candidate draws it)."""
    if fx.kwargs.get("generator") is not None:
        raise Unsupported(f"aten.{op_name(fx.target)} from a generator of the reference's own")
    meta = fx.meta["val"]
    return Input(
        tuple(int(s) for s in meta.shape), ctype_of(meta.dtype), position=position, name=f"draw:{op_name(fx.target)}"
    )


def lowers(name: str) -> bool:
    """Whether the lowering has a handler for the ATen op ``name`` (``addmm``, ``relu_``, ``getitem``)."""
    return _handler_of(name) in HANDLERS or name in _PLUMBING


def _handler_name(fx: Any) -> str:
    return _handler_of(op_name(fx.target))


def _handler_of(name: str) -> str:
    """The handler of an op: in-place ``relu_`` is ``relu``, functionalized ``view_copy`` is ``view``."""
    if name.endswith("_") and not name.startswith("_"):
        return name[:-1]
    if name.endswith("_copy") and name not in HANDLERS and name[:-5] in HANDLERS:
        return name[:-5]
    return name


def _call(fx: Any, env: dict[Any, Any], placeholders: list[Any]) -> Any:
    name = op_name(fx.target)

    def value(a: Any) -> Any:
        if isinstance(a, (list, tuple)):
            return type(a)(value(x) for x in a)
        return env[a] if hasattr(a, "op") and a in env else a

    args = [value(a) for a in fx.args]
    kwargs = {k: value(v) for k, v in fx.kwargs.items()}
    if name == "getitem":
        return args[0][args[1]]
    unusable = next((a for a in [*args, *kwargs.values()] if isinstance(a, Unusable)), None)
    if unusable is not None:
        return unusable  # refused only if an output depends on it
    meta = fx.meta.get("val")
    if meta is None:
        raise Unsupported(f"aten.{name} has no traced value")
    if name.endswith("_") and not name.startswith("_"):  # in place: the target now holds the result
        target = fx.args[0]
        if target in placeholders:
            if name == "copy_":  # an input or buffer written back (running statistics): no output reads it
                return env[target]
            raise Unsupported(f"the reference updates its input in place (aten.{name})")
        result = HANDLERS[_handler_name(fx)](args, kwargs, meta)
        env[target] = result
        return result
    result = HANDLERS[_handler_name(fx)](args, kwargs, meta)
    pairs = (
        zip(result, meta, strict=False)
        if isinstance(meta, (tuple, list)) and isinstance(result, tuple)
        else [(result, meta)]
    )
    for lowered, traced in pairs:
        if isinstance(lowered, Node) and hasattr(traced, "shape"):
            if tuple(lowered.shape) != tuple(int(s) for s in traced.shape):
                raise Unsupported(
                    f"aten.{name}: lowered shape {lowered.shape} differs from traced {tuple(traced.shape)}"
                )
    return result


__all__ = ["Traced", "Unusable", "lowers", "op_name", "trace"]
