"""A region as a KernelBench-format task file that ``kiln optimize`` and ``kiln eval`` take as it is.

``Model`` holds the region's weights as parameters (random, with the model's weights' mean
and spread), its constants as buffers (``get_init_inputs`` builds them with the operations
the model builds them with), and replays the region's ATen operations in ``forward``; ``get_inputs`` draws
activations with the spread the model's own had at the example inputs. ``render_workloads`` makes
one task of a region captured at several input shapes: the sizes that differ are size variables, one
KILN workload per shape.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import math
import operator
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from kernelkiln.lowering.trace import op_name
from kernelkiln.model.regions import Region


@dataclass(frozen=True)
class Spread:
    """What a value looked like at the example inputs: its mean and spread, or its range for integers."""

    mean: float = 0.0
    std: float = 1.0
    low: int = 0
    high: int = 1

    def rounded(self) -> str:
        """``std + mean`` to the nearest power of two (the mean to a multiple of it), as an expression's tail.

        Coarse on purpose: the same layer in two models (or two builds of one) draws its
        weights a little differently, and equal task files are what memory's exact reuse
        recognizes; the check's tolerances care about the scale, not its third digit.
        """
        if self.std <= 0 or not math.isfinite(self.std):
            return f"0 + {self.mean:.3g}"
        unit = 2.0 ** round(math.log2(self.std))
        mean = round(self.mean / unit) * unit
        return f"{unit!r} {'-' if mean < 0 else '+'} {abs(mean)!r}"

    @staticmethod
    def of(t: torch.Tensor) -> Spread:
        if t.numel() == 0:
            return Spread()
        if t.dtype.is_floating_point:
            d = t.detach().double()
            return Spread(float(d.mean()), float(d.std()) if t.numel() > 1 else 0.0)
        d = t.detach().long()
        return Spread(float(d.float().mean()), 0.0, int(d.min()), int(d.max()))


# A view in the model may rely on strides its inputs have there (attention's output is laid out
# transposed) that a task's freshly drawn inputs lack: in a task file it is a reshape, the same values.
_RESPELLED = {"aten.view.default": "torch.ops.aten.reshape.default"}


class Unrenderable(Exception):
    """A node argument a task file cannot spell (a symbolic size, an opaque object)."""


def _number(x: float) -> str:
    if math.isnan(x):
        return 'float("nan")'
    if math.isinf(x):
        return 'float("inf")' if x > 0 else 'float("-inf")'
    return repr(x)


def _arg(a: Any, names: dict[fx.Node, str]) -> str:
    if isinstance(a, fx.Node):
        return names[a]
    if isinstance(a, list):
        return "[" + ", ".join(_arg(x, names) for x in a) + "]"
    if isinstance(a, tuple):
        return "(" + "".join(_arg(x, names) + ", " for x in a) + ")"
    if isinstance(a, (torch.dtype, torch.layout, torch.memory_format)):
        return str(a)
    if isinstance(a, torch.device):
        return f"torch.device({str(a)!r})"
    if isinstance(a, bool) or a is None or isinstance(a, (int, str)):
        return repr(a)
    if isinstance(a, float):
        return _number(a)
    raise Unrenderable(f"an argument of type {type(a).__name__}")


def _call(n: fx.Node, names: dict[fx.Node, str]) -> str:
    if n.target is operator.getitem:
        return f"{_arg(n.args[0], names)}[{_arg(n.args[1], names)}]"
    if not isinstance(n.target, torch._ops.OpOverload):
        raise Unrenderable(f"a call of {n.target}")
    args = [_arg(a, names) for a in n.args] + [f"{k}={_arg(v, names)}" for k, v in n.kwargs.items()]
    op = _RESPELLED.get(str(n.target), f"torch.ops.{n.target.namespace}.{n.target._opname}.{n.target._overloadname}")
    return f"{op}({', '.join(args)})"


def _shape(n: fx.Node) -> tuple[int, ...]:
    return tuple(int(s) for s in n.meta["val"].shape)


def _dtype(n: fx.Node) -> torch.dtype:
    return n.meta["val"].dtype


def _draw(n: fx.Node, spread: Spread) -> str:
    """An expression drawing a tensor like ``n``'s value."""
    shape, dtype = _shape(n), _dtype(n)
    if dtype == torch.bool:
        return f"torch.rand({shape!r}) < {max(0.05, min(0.95, spread.mean)):.3g}"
    if not dtype.is_floating_point:
        return f"torch.randint({spread.low}, {spread.high + 1}, {shape!r}, dtype={dtype})"
    return f"torch.randn({shape!r}, dtype={dtype}) * {spread.rounded()}"


def _constants(region: Region, names: dict[fx.Node, str]) -> list[str]:
    """``get_init_inputs`` lines building the region's constants from the operations that made them.

    They are made there, not in ``__init__``: a candidate keeps the reference's ``__init__`` and
    the guard refuses ATen calls in candidates, while ``get_init_inputs`` stays in the task.
    """
    needed: dict[fx.Node, None] = {}

    def visit(n: fx.Node) -> None:
        if n in needed:
            return
        for a in n.all_input_nodes:
            visit(a)
        needed[n] = None

    for c in region.constants:
        visit(c)
    order = {n: k for k, n in enumerate(region.nodes[0].graph.nodes)}
    made: dict[fx.Node, str] = {}
    lines = []
    for k, n in enumerate(sorted(needed, key=order.__getitem__)):
        made[n] = f"k{k}"
        lines.append(f"k{k} = {_call(n, made)}")
    lines.append("return [" + ", ".join(made[c] for c in region.constants) + "]")
    for k, c in enumerate(region.constants):
        names[c] = f"self.c{k}"
    return lines


def render(region: Region, title: str, spreads: dict[str, Spread] | None = None) -> str:
    """The task file's source; ``spreads`` (by node name) sets the random values' mean and spread."""
    spreads = spreads or {}
    names: dict[fx.Node, str] = {}
    made = _constants(region, names)
    constants = [f"c{k}" for k in range(len(region.constants))]
    init = [f'self.register_buffer("{c}", {c}, persistent=False)' for c in constants]
    for k, s in enumerate(region.state):
        spread = spreads.get(s.name, Spread())
        shape, dtype = _shape(s), _dtype(s)
        if dtype.is_floating_point:
            drawn = f"torch.randn({shape!r}, dtype={dtype}) * {spread.rounded()}"
            init.append(f"self.w{k} = nn.Parameter({drawn})")
        else:
            init.append(f'self.register_buffer("w{k}", {_draw(s, spread)})')
        names[s] = f"self.w{k}"
    for k, x in enumerate(region.inputs):
        names[x] = f"x{k}"
    body = []
    for k, n in enumerate([*region.pulled, *region.nodes]):
        names[n] = f"v{k}"
        body.append(f"v{k} = {_call(n, names)}")
    outs = ", ".join(names[o] for o in region.outputs)
    inputs = ", ".join(names[x] for x in region.inputs)
    draws = "".join(f"        {_draw(x, spreads.get(x.name, Spread()))},\n" for x in region.inputs)
    indent = "\n        "
    return f'''"""{title}

Operations: {", ".join(dict.fromkeys(op_name(n.target) for n in region.nodes))}.
Captured by `kiln model`: the model's own ATen operations at its example inputs; weights are
random with the model's mean and spread.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self{"".join(", " + c for c in constants)}):
        super().__init__(){indent}{indent.join(init) if init else "pass"}

    def forward(self, {inputs}):{indent}{indent.join(body)}
        return {outs}


def get_inputs():
    return [
{draws}    ]


def get_init_inputs():{"".join(chr(10) + "    " + line for line in made)}
'''


def by_structure(regions: Sequence[Region]) -> dict[str, list[Region]]:
    """``regions`` grouped by ``structure_key``, in order: the regions one task serves, per task."""
    groups: dict[str, list[Region]] = {}
    for region in regions:
        groups.setdefault(structure_key(region), []).append(region)
    return groups


def structure_key(region: Region) -> str:
    """Equal for regions with the same operations, arguments, shapes and dtypes (one task serves them all)."""
    return hashlib.sha256(render(region, "").encode()).hexdigest()[:16]


# Functions whose float literals are the operations' own arguments, not drawn statistics (spreads).
_ARGUMENT_FLOATS = ("forward", "get_init_inputs")


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(text).readline))


def _integer(text: str) -> int | None:
    value = ast.literal_eval(text)
    return value if type(value) is int else None


@dataclass(frozen=True)
class Aligned:
    """The first text with its varying integers named, and each name's value in every text."""

    text: str
    sizes: dict[str, tuple[int, ...]]


def align(texts: Sequence[str], names: Sequence[str]) -> Aligned:
    """Align ``texts`` (one rendered task per workload, named ``names``) token by token.

    Integer literals that differ become ``S0``, ``S1``, … (one name per tuple of values); a float that
    differs keeps the first text's value where it is a drawn statistic; any other difference is
    ``Unrenderable``.
    """
    streams = [_tokens(t) for t in texts]
    starts = [0]
    for line in io.StringIO(texts[0]).readlines():
        starts.append(starts[-1] + len(line))
    sizes: dict[tuple[int, ...], str] = {}
    edits: list[tuple[int, int, str]] = []
    where = ""  # the function the tokens are in
    for k, column in enumerate(zip(*streams, strict=False)):
        first = column[0]
        if k and first.type == tokenize.NAME and streams[0][k - 1].string == "def":
            where = first.string
        if all(t.type == first.type and t.string == first.string for t in column):
            continue
        row = first.start[0]
        if first.type == tokenize.NUMBER and all(t.type == tokenize.NUMBER for t in column):
            values = [_integer(t.string) for t in column]
            if all(v is not None for v in values):
                key = tuple(v for v in values if v is not None)
                name = sizes.setdefault(key, f"S{len(sizes)}")
                edits.append((starts[row - 1] + first.start[1], starts[row - 1] + first.end[1], name))
                continue
            if where not in _ARGUMENT_FLOATS:
                continue  # a drawn statistic (spreads): the first workload's
            shown = ", ".join(f"{t.string} in {n}" for t, n in zip(column, names, strict=True))
            raise Unrenderable(
                f"the region differs between the shapes: an operation's argument on line {row} ({shown})"
            )
        j = next(j for j, t in enumerate(column) if (t.type, t.string) != (first.type, first.string))
        raise Unrenderable(
            f"the region differs between the shapes: line {row} reads {first.string[:40]!r} in {names[0]} "
            f"and {column[j].string[:40]!r} in {names[j]}"
        )
    if len({len(s) for s in streams}) > 1:  # unreachable while each stream ends with ENDMARKER
        raise Unrenderable("the region differs between the shapes: their files have different lengths")
    text = texts[0]
    for start, end, name in reversed(edits):
        text = text[:start] + name + text[end:]
    return Aligned(text, {name: key for key, name in sizes.items()})


def render_workloads(
    regions: Sequence[Region],
    title: str,
    spreads: Sequence[dict[str, Spread]] | None = None,
    names: Sequence[str] | None = None,
) -> str:
    """One task file for the same region captured at several input shapes: a KILN workload per shape.

    ``regions``, ``spreads`` and ``names`` (default ``w0``, ``w1``, …) go in the workloads' order. A
    region whose shapes are the same at every shape is its first capture's ``render``, one workload.
    """
    names = list(names) if names is not None else [f"w{k}" for k in range(len(regions))]
    every = list(spreads) if spreads is not None else [{} for _ in regions]
    if not regions or len(names) != len(regions) or len(every) != len(regions):
        raise ValueError("render_workloads needs one region, and as many names and spreads, per workload")
    texts = [render(r, title, s) for r, s in zip(regions, every, strict=True)]
    if len(texts) == 1:
        return texts[0]
    found = align(texts, names)
    if not found.sizes:
        return texts[0]
    head, marker, tail = found.text.partition("\n\n\nclass Model(")
    assert marker, "render's layout changed: no class Model after the imports"
    defined = "".join(f"{n} = {v[0]}\n" for n, v in found.sizes.items())
    workloads = []
    for k, name in enumerate(names):
        items = [f'"name": {json.dumps(name, ensure_ascii=False)}', *(f'"{n}": {v[k]}' for n, v in found.sizes.items())]
        workloads.append("        {" + ", ".join(items) + "},\n")
    kiln = f'\n\nKILN = {{\n    "workloads": [\n{"".join(workloads)}    ]\n}}\n'
    return f"{head}\n\n{defined}\n\nclass Model({tail}{kiln}"


def workloads_key(regions: Sequence[Region]) -> str:
    """``structure_key`` for a region at several shapes: equal for regions one multi-workload task serves."""
    return hashlib.sha256(render_workloads(regions, "").encode()).hexdigest()[:16]


def shape_free_key(region: Region) -> str:
    """Equal for regions whose task files differ only in their numbers: the same region at other shapes."""
    tokens = _tokens(render(region, ""))
    stream = "\x00".join(f"{t.type}:{'#' if t.type == tokenize.NUMBER else t.string}" for t in tokens)
    return hashlib.sha256(stream.encode()).hexdigest()[:16]
