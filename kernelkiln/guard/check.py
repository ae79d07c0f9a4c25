"""Correctness comparison, done in the parent on bytes the worker sent back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from kernelkiln.task import Task


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def compare(task: Task, ref: torch.Tensor, out: Any, label: str) -> str | None:
    """None if ``out`` matches ``ref`` within the task's tolerance, else why not."""
    if not isinstance(out, torch.Tensor):
        return f"{label}: not a tensor"
    if out.shape != ref.shape:
        return f"{label}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    if out.dtype != ref.dtype:
        return f"{label}: dtype {out.dtype} != reference {ref.dtype}"
    if ref.numel() == 0:
        return None
    if not ref.is_floating_point() and not ref.is_complex():
        if torch.equal(out, ref):
            return None
        return f"{label}: {int((out != ref).sum())} of {ref.numel()} elements differ"
    tol = task.tolerance(ref.dtype)
    r, o = ref.double(), out.double()
    ref_finite = torch.isfinite(r)
    if bool((ref_finite & ~torch.isfinite(o)).any()):
        return f"{label}: non-finite values where the reference is finite"
    bad = ~torch.isclose(o, r, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
    if bool(bad.any()):
        diff = (o - r).abs()[ref_finite]
        idx = tuple(int(i) for i in bad.nonzero()[0])
        return (f"{label}: {int(bad.sum())} of {ref.numel()} elements outside tolerance "
                f"(atol={tol.atol:g}, rtol={tol.rtol:g}); max abs error {float(diff.max()):.3g}; "
                f"first at {idx}: got {float(o[idx]):.6g}, expected {float(r[idx]):.6g}")
    # Elementwise atol hides any error on outputs much smaller than it (a softmax over 4096
    # columns averages 2.4e-4 against a float32 atol of 1e-4), so a half-precision computation
    # would pass. Over the whole output, the error relative to the reference's size must
    # also stay within rtol: reordered float32 arithmetic is near 1e-6, half precision 1e-3.
    finite = ref_finite & torch.isfinite(o)
    scale = float(torch.linalg.vector_norm(r[finite]))
    if scale > 0:
        relative = float(torch.linalg.vector_norm((o - r)[finite])) / scale
        if relative > tol.rtol:
            return (f"{label}: error {relative:.2e} relative to the output's size exceeds rtol={tol.rtol:g} "
                    f"(a lower-precision computation?)")
    return None


def _constant(t: torch.Tensor) -> bool:
    return t.numel() > 1 and bool((t == t.reshape(-1)[0]).all())


def judge_trials(task: Task, refs: list[list[torch.Tensor]], inputs: list[list[Any]],
                 trials: list[dict[str, Any]], workload: str) -> str | None:
    """Why a workload's check trials fail, or None. ``refs``/``inputs`` are the parent's own."""
    previous: list[Any] | None = None
    for k, (ref, ins, trial) in enumerate(zip(refs, inputs, trials)):
        where = f"workload {workload}, trial {k + 1}"
        types = trial.get("types", [])
        bad_type = next((t for t in types if t != "torch.Tensor"), None)
        if bad_type is not None:
            return f"{where}: output is a {bad_type}, not exactly torch.Tensor"
        outs = trial.get("outputs") or []
        if len(outs) != len(ref):
            return f"{where}: returned {len(outs)} output(s), the reference returns {len(ref)}"
        if trial.get("aliased"):
            return f"{where}: the output aliases an input (returned or wrote into an input tensor)"
        for j, (orig, after) in enumerate(zip(ins, trial.get("inputs_after") or [])):
            if isinstance(orig, torch.Tensor) and (not isinstance(after, torch.Tensor) or after.shape != orig.shape
                                                   or not torch.equal(after, orig)):
                return f"{where}: the candidate mutated input {j}"
        for j, (r, o) in enumerate(zip(ref, outs)):
            label = f"{where}, output {j}"
            if isinstance(o, torch.Tensor) and o.shape == r.shape and o.numel() > 1 and _constant(o) and not _constant(r):
                return f"{label}: constant output ({float(o.reshape(-1)[0]):g} everywhere) where the reference varies"
            if previous is not None and isinstance(o, torch.Tensor) and isinstance(previous[j], torch.Tensor) \
                    and o.shape == previous[j].shape and torch.equal(o, previous[j]) and not torch.equal(r, refs[k - 1][j]):
                return f"{label}: same output as the previous call on different inputs (a cached or stale result)"
            problem = compare(task, r, o, label)
            if problem:
                return problem
        for j, (o, a) in enumerate(zip(outs, trial.get("again") or [])):
            problem = compare(task, o, a, f"{where}, output {j} on a second run")
            if problem:
                return f"{problem} (the candidate disagrees with itself on identical inputs)"
        previous = outs
    return None


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Run the parent's own torch work on one thread.

    Idle OpenMP threads spin for a while after a parallel region; in the parent they would
    steal a core from the worker being timed next.
    """
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def reference_outputs(task: Task, model: torch.nn.Module, workload_index: int, seed: int) -> tuple[list, list]:
    """The parent's own inputs and reference outputs for one seed."""
    workload = task.workloads[workload_index]
    # Bound while the reference runs too: a KernelBench forward may read module-level sizes.
    with task.bound(workload), torch.no_grad(), single_threaded():
        inputs = task.make_inputs(workload, seed)
        outs = [o.detach().clone() for o in _as_list(model(*[x.clone() if isinstance(x, torch.Tensor) else x
                                                             for x in inputs]))]
    return inputs, outs
