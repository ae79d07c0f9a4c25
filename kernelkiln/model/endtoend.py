"""The kept kernels put together: checked alone in the model, then checked and timed end to end at each shape.

A kernel that disagrees in the model at any declared shape is dropped with why. At each
shape the spliced model is checked on fresh inputs against eager and timed against eager
(and ``torch.compile``); a shape where the kernels together are wrong, or not faster than
eager beyond noise (the 10th percentile of the per-round ratio at or below 1), or could
not be timed runs in torch, so the user's model is never handed back wrong or slower.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch

from kernelkiln.errors import described
from kernelkiln.model import compilers, verify
from kernelkiln.model.backend import Backend
from kernelkiln.model.capture import Captured
from kernelkiln.model.report import EndToEnd
from kernelkiln.model.shapes import Declared, Shape
from kernelkiln.model.splice import Kernel, SpliceError, splice
from kernelkiln.model.spliced import SplicedModel
from kernelkiln.model.taskfile import structure_key
from kernelkiln.speedup import fmt_x

WIDE = 2  # wider-input trials per shape, as the guard's robustness trials per workload


@dataclass
class Assembled:
    model: torch.nn.Module  # a SplicedModel, the compiled model (through dynamo), or the user's own
    kernels: dict[str, Kernel]  # kept at one shape at least
    failures: dict[str, str]  # task key -> why its kernel was dropped in the model
    ends: list[EndToEnd]
    kept: list[bool]  # per shape: its graph runs kernels


def _graph(shape: Shape, kernels: dict[str, Kernel]) -> Any:
    assert shape.captured is not None
    used = {k: v for k, v in kernels.items() if shape.regions.get(k)}
    return splice(shape.captured, {k: shape.regions[k] for k in used}, used) if used else None


def _captured(shape: Shape) -> Captured:
    assert shape.captured is not None  # an exported shape
    return shape.captured


def assemble(
    model: torch.nn.Module,
    shapes: Sequence[Shape],
    kernels: dict[str, Kernel],
    baselines: tuple[str, ...],
    say: Callable[[str], None],
) -> Assembled:
    """Each kernel checked alone at each shape, then the survivors checked and timed together per shape."""
    say(f"splicing {len(kernels)} kernel(s) and checking the model end to end")
    failures: dict[str, str] = {}
    for key, kernel in kernels.items():  # each alone first: a failure names its region
        for shape in shapes:
            if not shape.regions.get(key):
                continue
            try:
                alone = SplicedModel(model, [(_captured(shape), _graph(shape, {key: kernel}))])
                failure = verify.check(model, alone, shape.declared.draw, trials=1).failure
            except (SpliceError, RuntimeError) as exc:
                failure = described(exc)
            if failure:
                where = f" at {shape.declared.label}" if shape.declared.label else ""
                failures[key] = f"in the model{where}: {failure}"
                break
    kept = {k: v for k, v in kernels.items() if k not in failures}
    graphs = [_graph(shape, kept) for shape in shapes]
    spliced = SplicedModel(model, [(_captured(s), g) for s, g in zip(shapes, graphs, strict=True)])
    ends = []
    for graph, end in zip(graphs, _measured(model, spliced, shapes, baselines, say), strict=True):
        why = _dropped(end, "spliced")
        if graph is None:
            end = end.model_copy(update={"kept": False})
        elif why:
            say(f"no kernel kept: {why}")
            end = end.model_copy(update={"kept": False, "dropped": why})
        ends.append(end)
    flags = [g is not None and e.kept for g, e in zip(graphs, ends, strict=True)]
    final = SplicedModel(
        model, [(_captured(s), g if k else None) for s, g, k in zip(shapes, graphs, flags, strict=True)]
    )
    used = {k: v for k, v in kept.items() if any(f and s.regions.get(k) for s, f in zip(shapes, flags, strict=True))}
    return Assembled(final, used, failures, ends, flags)


def assemble_compiled(
    model: torch.nn.Module,
    shapes: Sequence[Shape],
    kernels: dict[str, Kernel],
    baselines: tuple[str, ...],
    say: Callable[[str], None],
) -> Assembled:
    """Through dynamo: the kernels together under ``torch.compile`` with the backend, checked and timed per shape.

    Every shape runs the one compiled model, so the kernels are kept or dropped together: at a
    shape where they are wrong or slower than eager, all of them are dropped.
    """
    say(f"compiling the model with {len(kernels)} kernel(s) and checking it end to end")
    wanted = {structure_key(rs[0]): k for s in shapes for k, rs in s.regions.items() if k in kernels and rs}
    compiled = cast(torch.nn.Module, torch.compile(model, backend=Backend(kernels, wanted), dynamic=False))
    ends = _measured(model, compiled, shapes, baselines, say)
    why = next((w for e in ends if (w := _dropped(e, "compiled"))), "")
    if kernels and why:
        say(f"no kernel kept: {why}")
        ends = [x.model_copy(update={"kept": False, "dropped": why}) for x in ends]
        return Assembled(model, {}, {}, ends, [False] * len(shapes))
    if not kernels:
        ends = [x.model_copy(update={"kept": False}) for x in ends]
    return Assembled(compiled, kernels, {}, ends, [bool(kernels)] * len(shapes))


def _at(label: str) -> str:
    return f" at {label}" if label else ""


def _measured(
    model: torch.nn.Module,
    runner: Callable[..., Any],
    shapes: Sequence[Shape],
    baselines: tuple[str, ...],
    say: Callable[[str], None],
) -> list[EndToEnd]:
    """``runner`` checked and timed against eager (and the ``baselines``' torch.compile configurations,
    ``compilers.COMPILERS``) at each shape, progress said."""
    ends = []
    for shape in shapes:
        arms = "".join(f", torch.compile ({n})" for n in baselines)
        say(f"timing eager{arms} and the spliced model side by side{_at(shape.declared.label)}")
        ends.append(_end_to_end(model, runner, shape.declared, baselines))
    return ends


def _dropped(end: EndToEnd, what: str) -> str:
    """Why the kernels are not kept at ``end``'s shape: wrong, unmeasured, or not faster than eager beyond noise
    (the rounds' 10th percentile at or below 1, and so any median at or below it: a keep needs a measurement
    that supports it)."""
    if not end.correct:
        return f"together the kernels disagree with eager{_at(end.shape)}: {end.failure}"
    if end.unmeasured:
        return f"the {what} model could not be timed end to end{_at(end.shape)}: {end.unmeasured}"
    if end.vs_eager_interval is not None and end.vs_eager_interval[0] <= 1.0:
        low, high = end.vs_eager_interval
        return (
            f"the {what} model was not faster than eager end to end beyond noise{_at(end.shape)} "
            f"({fmt_x(end.vs_eager)}, rounds' 10-90% {fmt_x(low)}-{fmt_x(high)})"
        )
    return ""


def _end_to_end(
    model: torch.nn.Module, spliced: Callable[..., Any], shape: Declared, names: tuple[str, ...]
) -> EndToEnd:
    result = verify.check(model, spliced, shape.draw, wide=WIDE)
    example = shape.example
    arms: dict[str, Callable[[], Any]] = {"eager": lambda: model(*example)}
    compile_error: dict[str, str] = {}
    for name in names:
        compiled = compilers.compile_at(model, example, name)
        if compiled.run is None:
            compile_error[name] = compiled.error
        else:
            arms[f"compile:{name}"] = compiled.run
    arms["spliced"] = lambda: spliced(*example)
    timing = verify.time_arms(arms)
    checked = EndToEnd(
        shape=shape.label,
        correct=not result.failure,
        trials=result.trials,
        wide=result.wide,
        max_abs_error=result.max_abs_error,
        failure=result.failure,
        compile_error=compile_error,
        rounds=timing.rounds,
        disturbed=timing.disturbed,
        unmeasured=timing.blind,
    )
    if timing.blind:
        return checked
    ms = {k: v * 1e3 for k, v in timing.seconds.items()}
    compiled_ms = {n: ms[f"compile:{n}"] for n in names if f"compile:{n}" in ms}
    return checked.model_copy(
        update={
            "eager_ms": ms["eager"],
            "compile_ms": compiled_ms,
            "spliced_ms": ms["spliced"],
            "vs_eager": timing.speedup["spliced"],
            "vs_eager_interval": timing.interval["spliced"],
            "vs_compile": {n: timing.ratio(f"compile:{n}", "spliced") for n in compiled_ms},
        }
    )
