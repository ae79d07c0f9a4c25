"""Correctness comparison, done in the parent on bytes the worker sent back."""

from __future__ import annotations

import dataclasses
import secrets
import time
from dataclasses import dataclass
from typing import Any

import torch

from kernelkiln.guard.correctness.oracle import (
    ORACLE_FACTOR,
    ROUNDING_FACTOR,
    Exact,
    as_list,
    exact_outputs,
    floating,
    oracle_for,
    precise,
)
from kernelkiln.guard.verdict import CheckSetup
from kernelkiln.task import Task
from kernelkiln.torch_threads import one_torch_thread

_WIDE = "robustness trial, wider inputs"


@dataclass(frozen=True)
class Expected:
    """One trial as the parent computed it: its inputs, the reference's outputs and the oracle's.

    ``oracle`` holds, per output, the reference run in float64 (None for integer outputs and
    wherever the oracle does not apply: ``note`` says why).
    """

    inputs: list[Any]
    outputs: list[torch.Tensor]
    oracle: list[Exact | None]
    wide: bool = False
    note: str | None = None

    @property
    def finite(self) -> bool:
        return all(bool(torch.isfinite(o).all()) for o in self.outputs if floating(o))


# The worker runs the candidate about twice per trial where the parent ran the reference once and the float64
# oracle once or twice. A correct candidate may still be much slower than eager (VGG16's generated convolutions
# at default knobs took 13x eager's forward, and its check ran past 4x the parent's cost on a loaded machine):
# sixteen times leaves it room, and a hung one is still stopped.
CHECK_SLACK = 16.0


@dataclass(frozen=True)
class WorkloadCases:
    """One workload's check trials: the task's inputs first, then the robustness trials that count."""

    seeds: list[int]
    expected: list[Expected]
    skipped: int = 0  # robustness trials dropped because the reference was not finite on them
    reference_s: float = 0.0  # what making them cost the parent: the reference's runs and the oracle's

    def timeout_s(self, floor_s: float) -> float:
        """The worker's limit for running them: ``floor_s``, or longer where the reference itself is slow (a
        VGG's trials on a loaded two-core machine took a correct candidate over a minute)."""
        return max(floor_s, CHECK_SLACK * self.reference_s)

    @property
    def wide(self) -> list[bool]:
        return [e.wide for e in self.expected]


@dataclass(frozen=True)
class Bound:
    """The error an output may have: elementwise max(atol + rtol |x|, floor); ``relative`` in L2 over the whole."""

    atol: float
    rtol: float
    floor: float = 0.0
    relative: float = 0.0
    oracle: bool = False  # measured against the float64 oracle
    why: str = ""  # what widened ``floor`` and ``relative`` beyond the tolerance, for messages


def _bound(task: Task, ref: torch.Tensor, exact: Exact | None, widen: int) -> Bound:
    """How closely ``ref``'s counterpart must match: the task's tolerance, widened by measured errors.

    ``widen`` 1 adds ORACLE_FACTOR x the reference's own error against the oracle, 2 also
    ROUNDING_FACTOR x what rounding the inputs once more changes in the oracle's result.
    """
    tol = task.tolerance(ref.dtype)
    plain = Bound(tol.atol, tol.rtol, relative=tol.rtol, oracle=exact is not None)
    if exact is None or widen == 0 or exact.size == 0:
        return plain
    floor, relative = ORACLE_FACTOR * exact.own.largest, ORACLE_FACTOR * exact.own.l2 / exact.size
    why = f"{ORACLE_FACTOR:g} x the reference's own error"
    moved = exact.rounding() if widen == 2 else None
    if moved is not None:
        floor = max(floor, ROUNDING_FACTOR * moved.largest)
        relative = max(relative, ROUNDING_FACTOR * moved.l2 / exact.size)
        why = f"the larger of {why} and {ROUNDING_FACTOR:g} x what rounding the inputs once more changes"
    return Bound(tol.atol, tol.rtol, floor, max(tol.rtol, relative), oracle=True, why=why)


def _kind(ref: torch.Tensor, out: Any, label: str) -> str | None:
    """Why ``out`` is not a tensor of ``ref``'s shape and dtype, or None."""
    if not isinstance(out, torch.Tensor):
        return f"{label}: not a tensor"
    if out.shape != ref.shape:
        return f"{label}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    if out.dtype != ref.dtype:
        return f"{label}: dtype {out.dtype} != reference {ref.dtype}"
    return None


def _within(target: torch.Tensor, out: torch.Tensor, bound: Bound, label: str) -> str | None:
    """Why floating ``out`` is not within ``bound`` of ``target`` (float64 or complex128), or None."""
    o = precise(out)
    t_finite = torch.isfinite(target)
    finite = bool(t_finite.all())  # the usual case, which needs no masks
    o_finite = torch.isfinite(o)
    if not bool((o_finite | ~t_finite).all()):
        return f"{label}: non-finite values where the reference is finite"
    diff = (o - target).abs()
    ok = diff <= (bound.atol + bound.rtol * target.abs()).clamp_min(bound.floor)
    if not finite:
        ok = torch.where(t_finite, ok, (o == target) | (o.isnan() & target.isnan()))
    if not bool(ok.all()):
        bad = ~ok
        idx = tuple(int(i) for i in bad.nonzero()[0])
        largest = float(diff[t_finite].max()) if bool(t_finite.any()) else float("nan")
        widened = f", or {bound.floor:.3g}: {bound.why}" if bound.floor > bound.atol else ""
        source = " (float64 oracle)" if bound.oracle else ""
        return (
            f"{label}: {int(bad.sum())} of {target.numel()} elements outside tolerance "
            f"(atol={bound.atol:g}, rtol={bound.rtol:g}{widened}); max abs error {largest:.3g}; "
            f"first at {idx}: got {complex(o[idx]) if o.is_complex() else float(o[idx]):.6g}, "
            f"expected {complex(target[idx]) if target.is_complex() else float(target[idx]):.6g}{source}"
        )
    # Elementwise atol hides any error on outputs much smaller than it (a softmax over 4096
    # columns averages 2.4e-4 against a float32 atol of 1e-4), so a half-precision computation
    # would pass. Over the whole output, the error relative to the output's size must also
    # stay within rtol (or the widened bound): reordered float32 arithmetic is near 1e-6, half 1e-3.
    both = None if finite else t_finite & o_finite
    scale = float(torch.linalg.vector_norm(target if both is None else target[both]))
    if scale > 0:
        relative = float(torch.linalg.vector_norm(diff if both is None else diff[both])) / scale
        if relative > bound.relative:
            limit = f"rtol={bound.rtol:g}" if bound.relative <= bound.rtol else f"{bound.relative:.2e} ({bound.why})"
            return (
                f"{label}: error {relative:.2e} relative to the output's size exceeds {limit} "
                f"(a lower-precision computation?)"
            )
    return None


def _judged(
    task: Task,
    ref: torch.Tensor,
    exact: Exact | None,
    target: torch.Tensor,
    out: torch.Tensor,
    label: str,
    oracle: bool = True,
) -> str | None:
    """Why floating ``out`` is too far from ``target`` (the oracle's, if ``oracle``), or None.

    The widened bounds cost more (the last a float64 run): each is tried only for an output
    that fails the one before; an explicit tolerance is never widened.
    """
    widest = 0 if exact is None or task.tolerance(ref.dtype).explicit or exact.size == 0 else 2
    for widen in range(widest + 1):
        bound = _bound(task, ref, exact, widen)
        problem = _within(target, out, dataclasses.replace(bound, oracle=bound.oracle and oracle), label)
        if problem is None:
            return None
    return problem


def compare(task: Task, ref: torch.Tensor, out: Any, label: str, exact: Exact | None = None) -> str | None:
    """None if ``out`` matches the reference output ``ref``, else why not.

    With ``exact`` (the reference run in float64), the error is measured against it and may
    reach max(the task's tolerance, ORACLE_FACTOR x ``ref``'s own error, ROUNDING_FACTOR x
    the change rounding the inputs once more makes), elementwise and in L2 over the whole
    output (exactly the tolerance when the task gave it explicitly); without, the error
    against ``ref`` must stay within the task's tolerance. Integer outputs must be equal.
    """
    problem = _kind(ref, out, label)
    if problem or ref.numel() == 0:
        return problem
    if not floating(ref):
        if torch.equal(out, ref):
            return None
        return f"{label}: {int((out != ref).sum())} of {ref.numel()} elements differ"
    with one_torch_thread():
        return _judged(task, ref, exact, exact.value if exact is not None else precise(ref), out, label)


def _agrees(task: Task, first: Any, again: Any, ref: torch.Tensor, exact: Exact | None, label: str) -> str | None:
    """Why a second run's output is further from the first than the first may be from the exact result."""
    problem = _kind(first, again, label) if isinstance(first, torch.Tensor) else None
    if problem or not isinstance(first, torch.Tensor) or first.numel() == 0:
        return problem
    if not floating(first):
        return None if torch.equal(first, again) else f"{label}: {int((first != again).sum())} elements differ"
    return _judged(task, ref, exact, precise(first), again, label, oracle=False)


def _constant(t: torch.Tensor) -> bool:
    return t.numel() > 1 and bool((t == t.reshape(-1)[0]).all())


def _judge_trial(
    task: Task, exp: Expected, trial: dict[str, Any], where: str, previous: tuple[list[Any], Expected] | None
) -> str | None:
    types = trial.get("types", [])
    bad_type = next((t for t in types if t != "torch.Tensor"), None)
    if bad_type is not None:
        return f"{where}: output is a {bad_type}, not exactly torch.Tensor"
    outs = trial.get("outputs") or []
    if len(outs) != len(exp.outputs):
        return f"{where}: returned {len(outs)} output(s), the reference returns {len(exp.outputs)}"
    if trial.get("aliased"):
        return f"{where}: the output aliases an input (returned or wrote into an input tensor)"
    for j, (orig, after) in enumerate(zip(exp.inputs, trial.get("inputs_after") or [], strict=False)):
        if isinstance(orig, torch.Tensor) and (
            not isinstance(after, torch.Tensor) or after.shape != orig.shape or not torch.equal(after, orig)
        ):
            return f"{where}: the candidate mutated input {j}"
    for j, (r, x, o) in enumerate(zip(exp.outputs, exp.oracle, outs, strict=False)):
        label = f"{where}, output {j}"
        if isinstance(o, torch.Tensor) and o.shape == r.shape and o.numel() > 1 and _constant(o) and not _constant(r):
            return f"{label}: constant output ({float(o.reshape(-1)[0]):g} everywhere) where the reference varies"
        if previous is not None:
            before, before_exp = previous[0][j], previous[1].outputs[j]
            if (
                isinstance(o, torch.Tensor)
                and isinstance(before, torch.Tensor)
                and o.shape == before.shape
                and torch.equal(o, before)
                and not torch.equal(r, before_exp)
                # a reference whose outputs on the two inputs agree within the tolerance cannot tell a cached
                # result from a right one (EfficientNet-B2 at batch 2: 7e-8 apart): the comparison below judges
                and compare(task, r, before_exp, label) is not None
            ):
                return f"{label}: same output as the previous call on different inputs (a cached or stale result)"
        problem = compare(task, r, o, label, x)
        if problem:
            return problem
    for j, (r, x, o, a) in enumerate(zip(exp.outputs, exp.oracle, outs, trial.get("again") or [], strict=False)):
        problem = _agrees(task, o, a, r, x, f"{where}, output {j} on a second run")
        if problem:
            return f"{problem} (the candidate disagrees with itself on identical inputs)"
    return None


def judge_trials(task: Task, expected: list[Expected], trials: list[dict[str, Any]], workload: str) -> str | None:
    """Why a workload's check trials fail, or None. ``expected`` is the parent's own, trial by trial."""
    previous: tuple[list[Any], Expected] | None = None
    with one_torch_thread():
        for k, (exp, trial) in enumerate(zip(expected, trials, strict=False)):
            where = f"workload {workload}, trial {k + 1}" + (f" ({_WIDE})" if exp.wide else "")
            problem = _judge_trial(task, exp, trial, where, previous)
            if problem:
                return f"correct on the task's input distribution only: {problem}" if exp.wide else problem
            previous = (trial.get("outputs") or [], exp)
    return None


def reference_outputs(
    task: Task, model: torch.nn.Module, workload_index: int, seed: int, wide: bool = False
) -> Expected:
    """The parent's own inputs, reference outputs and oracle outputs for one seed.

    ``wide``: on the robustness trial's wider inputs; the oracle is not run when the
    reference's outputs are not finite there (such a trial does not count).
    """
    workload = task.workloads[workload_index]
    oracle = oracle_for(model)
    # Bound while the reference runs too: a KernelBench forward may read module-level sizes.
    with task.bound(workload), torch.no_grad(), one_torch_thread():
        inputs = task.make_inputs(workload, seed, wide)
        outs = [
            o.detach().clone()
            for o in as_list(model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
        ]
        expected = Expected(inputs, outs, [None] * len(outs), wide)
        if wide and not expected.finite:
            return expected

        def perturbed() -> list[Any] | None:
            with task.bound(workload), torch.no_grad(), one_torch_thread():
                return oracle.perturbed(inputs)

        exact = exact_outputs(outs, oracle.outputs(model, inputs, outs), perturbed)
    return dataclasses.replace(expected, oracle=exact, note=oracle.note)


def make_cases(task: Task, model: torch.nn.Module, index: int, trials: int, robustness_trials: int) -> WorkloadCases:
    """Fresh seeds for one workload's check, with the parent's expected results for each."""
    started = time.perf_counter()
    seeds = [secrets.randbits(31) for _ in range(trials)]
    expected = [reference_outputs(task, model, index, s) for s in seeds]
    skipped = 0
    for _ in range(robustness_trials if task.robustness else 0):
        seed = secrets.randbits(31)
        exp = reference_outputs(task, model, index, seed, wide=True)
        if exp.finite:
            seeds.append(seed)
            expected.append(exp)
        else:
            skipped += 1
    return WorkloadCases(seeds, expected, skipped, time.perf_counter() - started)


def summarize(task: Task, cases: list[WorkloadCases]) -> CheckSetup:
    """How an evaluation's check was done, for its verdict."""
    note = next(
        (
            f"workload {w.name}: {e.note}"
            for w, c in zip(task.workloads, cases, strict=False)
            for e in c.expected
            if e.note
        ),
        "",
    )
    oracle = (
        all(
            x is not None
            for c in cases
            for e in c.expected
            for r, x in zip(e.outputs, e.oracle, strict=False)
            if floating(r)
        )
        and not note
    )
    wide = [w for c in cases for w in c.wide]
    return CheckSetup(
        oracle=oracle,
        oracle_note=note,
        trials=wide.count(False),
        robustness_trials=wide.count(True),
        robustness_skipped=sum(c.skipped for c in cases),
    )
