"""The kept kernels put together: checked alone in the model, then checked and timed end to end at each shape.

A kernel that disagrees in the model at any declared shape is dropped with why. The
spliced model has forms: its kernels called directly ("eager"), and the model compiled
with each torch.compile configuration compared against (``compilers``), where the
kernels' custom ops are the only change to the graph Inductor compiles, so every region
without a kernel gets Inductor's code. At each shape every form is checked on fresh and
wider inputs against eager and timed beside eager and each configuration; the form
fastest over the shapes is the one handed back. A shape where the kernels together are
wrong, or that form is not faster than the fastest of eager and every configuration
beyond noise (the 10th percentile of the per-round ratio at or below 1), or that could
not be timed runs in torch, so the model is never handed back wrong or slower than the
user's best compile.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch

from kernelkiln.errors import described
from kernelkiln.model import compilers, verify
from kernelkiln.model.backend import Backend
from kernelkiln.model.capture import Captured
from kernelkiln.model.report import EndToEnd, baseline, short_of, spread
from kernelkiln.model.shapes import Declared, Shape
from kernelkiln.model.splice import Kernel, SpliceError, splice
from kernelkiln.model.spliced import SplicedModel
from kernelkiln.model.taskfile import structure_key

WIDE = 2  # wider-input trials per shape, as the guard's robustness trials per workload


@dataclass
class Assembled:
    model: torch.nn.Module  # a SplicedModel (compiled, in its form), the model through the backend, or the
    # user's own as its fastest baseline runs it (eager, or compiled with the fastest configuration)
    kernels: dict[str, Kernel]  # kept at one shape at least
    failures: dict[str, str]  # task key -> why its kernel was dropped in the model
    ends: list[EndToEnd]
    kept: list[bool]  # per shape: its graph runs kernels
    form: str = "eager"  # how ``model`` runs them: directly, or compiled with a configuration (``compilers``)
    handed: str = "eager"  # what ``model`` is, in words: "spliced", "spliced, compiled (strongest)", ...


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
    forms = (
        (lambda s: _forms(spliced, s.declared.example, baselines))
        if any(g is not None for g in graphs)
        else (lambda s: Forms({"eager": spliced}, {}))  # nothing spliced: the baselines alone matter
    )
    measured = _measured(model, forms, shapes, baselines, say)
    for graph, end in zip(graphs, measured, strict=True):
        why = _dropped(end, "spliced")
        if graph is None:
            end = end.model_copy(update={"kept": False})
        elif why:
            say(f"no kernel kept: {why}")
            end = end.model_copy(update={"kept": False, "dropped": why})
        ends.append(end)
    flags = [g is not None and e.kept for g, e in zip(graphs, ends, strict=True)]
    final: torch.nn.Module = SplicedModel(
        model, [(_captured(s), g if k else None) for s, g, k in zip(shapes, graphs, flags, strict=True)]
    )
    used = {k: v for k, v in kept.items() if any(f and s.regions.get(k) for s, f in zip(shapes, flags, strict=True))}
    if not used:
        return _unspliced(model, failures, ends, say)
    form = ends[0].form
    if form != "eager":
        say(f"the spliced model runs compiled with torch.compile ({form}): its fastest form here")
        final = compilers.wrap(final, form, spliced=True)
    handed = "spliced" + ("" if form == "eager" else f", compiled ({form})")
    return Assembled(final, used, failures, ends, flags, form, handed)


def _unspliced(
    model: torch.nn.Module, failures: dict[str, str], ends: list[EndToEnd], say: Callable[[str], None]
) -> Assembled:
    """No kernel kept: the model handed back as the fastest baseline runs it (compiled, where a configuration
    beat eager), so it is never slower than the user's best compile."""
    fastest = _fastest(ends)
    flags = [False] * len(ends)
    if fastest == "eager":
        return Assembled(model, {}, failures, ends, flags, "eager", "eager")
    say(f"no kernel kept: the model is handed back as torch.compile ({fastest}) runs it, the fastest here")
    return Assembled(compilers.wrap(model, fastest), {}, failures, ends, flags, "eager", f"torch.compile ({fastest})")


def _fastest(ends: Sequence[EndToEnd]) -> str:
    """The baseline fastest relative to eager summed over the shapes timed ("eager" if none was)."""
    return _least([{"eager": e.eager_ms, **e.compile_ms} for e in ends if e.eager_ms])


def _least(shapes: Sequence[dict[str, float]]) -> str:
    """Of "eager" and the configurations' names, the one whose time relative to the shape's "eager" entry sums
    least over ``shapes`` (each a name -> time; a name is a candidate where every shape has it)."""
    names = [n for n in ["eager", *compilers.COMPILERS] if all(n in times for times in shapes)]
    return min(names, key=lambda n: sum(times[n] / times["eager"] for times in shapes), default="eager")


def assemble_compiled(
    model: torch.nn.Module,
    shapes: Sequence[Shape],
    kernels: dict[str, Kernel],
    baselines: tuple[str, ...],
    say: Callable[[str], None],
) -> Assembled:
    """Through dynamo: the kernels together under ``torch.compile`` with the backend, checked and timed per shape.

    Every shape runs the one compiled model, so the kernels are kept or dropped together: at a
    shape where they are wrong or not faster than the fastest baseline, all of them are dropped.
    """
    say(f"compiling the model with {len(kernels)} kernel(s) and checking it end to end")
    wanted = {structure_key(rs[0]): k for s in shapes for k, rs in s.regions.items() if k in kernels and rs}
    compiled = cast(torch.nn.Module, torch.compile(model, backend=Backend(kernels, wanted), dynamic=False))
    ends = _measured(model, lambda s: Forms({"eager": compiled}, {}), shapes, baselines, say)
    why = next((w for e in ends if (w := _dropped(e, "compiled"))), "")
    if kernels and why:
        say(f"no kernel kept: {why}")
        ends = [x.model_copy(update={"kept": False, "dropped": why}) for x in ends]
    if not kernels or why:
        return _unspliced(model, {}, [x.model_copy(update={"kept": False}) for x in ends], say)
    return Assembled(compiled, kernels, {}, ends, [True] * len(shapes), "eager", "spliced (through dynamo)")


def _at(label: str) -> str:
    return f" at {label}" if label else ""


@dataclass
class Forms:
    """Ways to run the spliced model, by form name ("eager", or a configuration), and the forms that failed."""

    runners: dict[str, Callable[..., Any]]
    errors: dict[str, str]


def _forms(spliced: torch.nn.Module, example: tuple[Any, ...], baselines: tuple[str, ...]) -> Forms:
    """The spliced model's forms: its kernels called directly ("eager"), and the model compiled with each
    configuration (the kernels' custom ops the only change to the graph Inductor compiles)."""
    forms: dict[str, Callable[..., Any]] = {"eager": spliced}
    errors: dict[str, str] = {}
    for name in baselines:
        compiled = compilers.compile_at(spliced, example, name, spliced=True)
        if compiled.model is None:
            errors[name] = compiled.error
        else:
            forms[name] = compiled.model
    return Forms(forms, errors)


def _arm(form: str) -> str:
    return "spliced" if form == "eager" else f"spliced:{form}"


def _measured(
    model: torch.nn.Module,
    forms: Callable[[Shape], Forms],
    shapes: Sequence[Shape],
    baselines: tuple[str, ...],
    say: Callable[[str], None],
) -> list[EndToEnd]:
    """The spliced model's forms checked and timed against eager and the ``baselines``' torch.compile
    configurations (``compilers.COMPILERS``) at each shape, progress said; every shape reports the form
    fastest over the shapes (``_choose``)."""
    timed = []
    for shape in shapes:
        arms = "".join(f", torch.compile ({n})" for n in baselines)
        say(f"timing eager{arms} and the spliced model's forms side by side{_at(shape.declared.label)}")
        timed.append(_end_to_end(model, forms(shape), shape.declared, baselines))
    form = _choose([t for _, t in timed])
    return [_with_form(end, timing, form, baselines) for end, timing in timed]


def _choose(timings: Sequence[verify.Timing | None]) -> str:
    """The form fastest relative to eager summed over the shapes where every form was timed ("eager" if none)."""
    forms = ["eager", *compilers.COMPILERS]
    return _least(
        [
            {"eager": t.seconds["eager"]} | {f: t.seconds[_arm(f)] for f in forms if _arm(f) in t.seconds}
            for t in timings
            if t
        ]
    )


def _dropped(end: EndToEnd, what: str) -> str:
    """Why the kernels are not kept at ``end``'s shape: wrong, unmeasured, or not faster than the fastest of eager
    and the torch.compile configurations beyond noise (``report.short_of``)."""
    if not end.correct:
        return f"together the kernels disagree with eager{_at(end.shape)}: {end.failure}"
    if end.unmeasured:
        return f"the {what} model could not be timed end to end{_at(end.shape)}: {end.unmeasured}"
    if short_of(end.vs_fastest_interval) and end.vs_fastest_interval is not None:
        return (
            f"the {what} model was not faster than {baseline(end.fastest)} end to end beyond noise{_at(end.shape)} "
            f"({spread(end.vs_fastest, end.vs_fastest_interval)})"
        )
    return ""


def _end_to_end(
    model: torch.nn.Module, forms: Forms, shape: Declared, names: tuple[str, ...]
) -> tuple[EndToEnd, verify.Timing | None]:
    """Every form checked against eager on fresh and wider inputs (a form that disagrees is left out, said in
    ``spliced_compile_error``; the kernels called directly decide ``correct``), then all timed side by side."""
    runners = dict(forms.runners)
    errors = dict(forms.errors)
    result = verify.check(model, runners["eager"], shape.draw, wide=WIDE)
    for form in [f for f in runners if f != "eager"]:
        other = verify.check(model, runners[form], shape.draw, wide=WIDE)
        if other.failure:
            errors[form] = f"disagrees with eager: {other.failure}"
            del runners[form]
    example = shape.example
    arms: dict[str, Callable[[], Any]] = {"eager": lambda: model(*example)}
    compile_error: dict[str, str] = {}
    for name in names:
        compiled = compilers.compile_at(model, example, name)
        if compiled.run is None:
            compile_error[name] = compiled.error
        else:
            arms[f"compile:{name}"] = compiled.run
    for form, runner in runners.items():
        arms[_arm(form)] = functools.partial(runner, *example)
    checked = EndToEnd(
        shape=shape.label,
        correct=not result.failure,
        trials=result.trials,
        wide=result.wide,
        max_abs_error=result.max_abs_error,
        failure=result.failure,
        compile_error=compile_error,
        spliced_compile_error=errors,
    )
    if result.failure:
        return checked, None
    timing = verify.time_arms(arms)
    checked = checked.model_copy(update={"rounds": timing.rounds, "disturbed": timing.disturbed})
    if timing.blind:
        return checked.model_copy(update={"unmeasured": timing.blind}), None
    return checked, timing


def _with_form(end: EndToEnd, timing: verify.Timing | None, form: str, names: tuple[str, ...]) -> EndToEnd:
    """``end`` with the figures of ``form`` (the one handed back) filled in from ``timing``."""
    if timing is None or _arm(form) not in timing.seconds:
        return end
    ms = {k: v * 1e3 for k, v in timing.seconds.items()}
    arm = _arm(form)
    baselines = ["eager", *(f"compile:{n}" for n in names if f"compile:{n}" in ms)]
    vs_fastest, interval = timing.versus(arm, baselines)
    return end.model_copy(
        update={
            "form": form,
            "eager_ms": ms["eager"],
            "compile_ms": {n: ms[f"compile:{n}"] for n in names if f"compile:{n}" in ms},
            "spliced_ms": ms[arm],
            "forms_ms": {n: ms[_arm(n)] for n in ("eager", *names) if _arm(n) in ms},
            "vs_eager": timing.speedup[arm],
            "vs_eager_interval": timing.interval[arm],
            "vs_compile": {n: timing.ratio(f"compile:{n}", arm) for n in names if f"compile:{n}" in ms},
            "vs_fastest": vs_fastest,
            "vs_fastest_interval": interval,
        }
    )
