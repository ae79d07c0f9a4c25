"""Lower a task's reference to a standalone C/C++ candidate with KNOBS: ``kiln seed``.

trace (ATen ops at the task's real inputs) → graph (pointwise nodes, views, reductions,
scans, windows) → plan (row groups fuse reductions with their elementwise neighbours)
→ one C function per workload → the candidate file. A family the lowering lacks
(matmul, conv) is refused naming its operations; adding one is a handler in
``aten_*`` plus a kernel kind in ``schedule`` and an emitter.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelkiln.lowering.body import NotFusable
from kernelkiln.lowering.candidate import Entry, render
from kernelkiln.lowering.emit import FunctionEmitter
from kernelkiln.lowering.graph import Unsupported
from kernelkiln.lowering.loops import HEADER
from kernelkiln.lowering.schedule import plan
from kernelkiln.lowering.trace import Traced, trace
from kernelkiln.platforms.host import default_threads, simd_floats
from kernelkiln.task.model import Task

__all__ = ["Generated", "Unsupported", "generate"]


@dataclass(frozen=True)
class Generated:
    """A generated candidate: its source, the kernel kinds it uses and the knobs it declares."""

    source: str
    kinds: tuple[str, ...]
    knobs: tuple[str, ...]
    ops: tuple[str, ...]
    fused: int  # kernels per workload after fusion (the first workload's)


def _function(traced: Traced, name: str):
    solo: set[int] = set()
    while True:
        p = plan(traced.graph, solo)
        emitter = FunctionEmitter(traced.graph, p, name)
        try:
            return p, emitter, emitter.emit()
        except NotFusable as exc:
            if id(exc.node) in solo:
                raise Unsupported(f"could not schedule a {type(exc.node).__name__.lower()}") from None
            solo.add(id(exc.node))


def generate(task: Task, threads: int | None = None) -> Generated:
    """The candidate for ``task`` (CPU, C with OpenMP); raises ``Unsupported`` with one line."""
    entries, functions, kinds, ops, fused, reduces = [], [], [], [], None, False
    seen: dict[tuple, str] = {}
    for k, workload in enumerate(task.workloads):
        traced = trace(task, workload)
        params = tuple(t.removeprefix("param:") for t in traced.tensors if t.startswith("param:"))
        inputs = tuple(s for s, t in zip(traced.input_shapes, traced.tensors, strict=True) if t.startswith("input:"))
        param_shapes = tuple(s for s, t in zip(traced.input_shapes, traced.tensors, strict=True)
                             if t.startswith("param:"))
        p, emitter, code = _function(traced, f"kiln_w{k}")
        if inputs in seen:
            if seen[inputs] != code.replace(f"kiln_w{k}(", "kiln_w("):
                raise Unsupported(f"workloads {workload.name} and an earlier one have the same input shapes "
                                  "but different computations")
            continue
        seen[inputs] = code.replace(f"kiln_w{k}(", "kiln_w(")
        fused = fused if fused is not None else len(p.kernels)
        kinds += [kernel.kind for kernel in p.kernels]
        reduces = reduces or any(kernel.reductions for kernel in p.kernels)
        ops += traced.graph.ops
        functions.append(code)
        entries.append(Entry(
            name=f"kiln_w{k}", signature=f"void({', '.join(emitter.signature_types())})", input_shapes=inputs,
            params=params, param_shapes=param_shapes,
            outputs=tuple((tuple(s), o.ctype) for s, o in zip(traced.output_shapes, p.outputs, strict=True)),
            temps=tuple((j, t.numel, t.ctype) for j, t in emitter.temps), single=traced.single))
    knobs = ["ACC"] if reduces else []
    knobs += ["UNROLL", "VEC"]
    if {"row", "column", "scan"} & set(kinds):
        knobs.append("TILE")
    unique_kinds = tuple(dict.fromkeys(kinds))
    summary = ", ".join(dict.fromkeys(ops)) or "no operations"
    cap = threads or default_threads()
    source = render(task, HEADER + "\n" + "\n".join(functions), entries, knobs, cap, summary, simd_floats())
    return Generated(source, unique_kinds, tuple(["THREADS", *knobs, "FLAGS"]), tuple(dict.fromkeys(ops)), fused or 0)
