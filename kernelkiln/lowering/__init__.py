"""Lower a task's reference to a standalone C/C++ candidate with KNOBS: ``kiln lower``.

trace (ATen ops at the task's real inputs) → graph (pointwise nodes, views, reductions,
scans, windows) → plan (row groups fuse reductions with their elementwise neighbours)
→ one C function per workload → the candidate file. Products and convolutions are
GEMM kernels with fused epilogues (``gemm``); a convolution's function holds both of
its forms (implicit GEMM and direct) behind the CONV knob, and a row group whose passes
share a value holds a form that keeps it per row behind ROWCACHE (``rowcache``). A family
the lowering lacks is refused naming its operations; adding one is a handler in ``aten_*``
plus a kernel kind in ``schedule`` and an emitter.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

from kernelkiln.lowering.arena import ARENA, arena_views
from kernelkiln.lowering.aten_matmul import conv_mode
from kernelkiln.lowering.body import NotFusable
from kernelkiln.lowering.candidate import Entry, render
from kernelkiln.lowering.conv_blocked import blocked_tiles
from kernelkiln.lowering.emit import FunctionEmitter
from kernelkiln.lowering.gemm import GEMM_HEADER, GEMM_KNOBS, gemm_vocabulary
from kernelkiln.lowering.graph import Unsupported
from kernelkiln.lowering.loops import HEADER
from kernelkiln.lowering.rowcache import ROWCACHE_HEADER
from kernelkiln.lowering.schedule import Kernel, Plan, plan
from kernelkiln.lowering.stream import STREAM_HEADER
from kernelkiln.lowering.trace import Traced, trace
from kernelkiln.lowering.vmath import VMATH_HEADER
from kernelkiln.native.build import MAX_SOURCE_BYTES
from kernelkiln.native.signature import MAX_PARAMS
from kernelkiln.platforms.host import default_threads, last_level_cache_bytes, simd_floats
from kernelkiln.task.model import Task, Workload

__all__ = ["Generated", "Unsupported", "generate"]


@dataclass(frozen=True)
class Generated:
    """A generated candidate: its source, the kernel kinds it uses and the knobs it declares."""

    source: str
    kinds: tuple[str, ...]
    knobs: tuple[str, ...]
    ops: tuple[str, ...]
    fused: int  # kernels per workload after fusion (the first workload's)


def _scheduled(traced: Traced, name: str, temp_prefix: str = "tmp") -> tuple[Plan, FunctionEmitter, str]:
    """The plan, its emitter and the function body; a group that cannot fuse is split and planned again."""
    solo: set[int] = set()
    while True:
        p = plan(traced.graph, solo, temp_prefix)
        emitter = FunctionEmitter(traced.graph, p, name)
        try:
            return p, emitter, emitter.body()
        except NotFusable as exc:
            if id(exc.node) in solo:
                raise Unsupported(f"could not schedule a {type(exc.node).__name__.lower()}") from None
            solo.add(id(exc.node))


def _function(
    task: Task, workload: Workload, name: str
) -> tuple[Traced, Plan, FunctionEmitter, list[tuple[int, str]], str, list[Kernel], set[str]]:
    """(traced, plan, emitter, scratch buffers (elements, C type), C function, kernels, the knobs it reads) of
    one workload; a convolution's holds both CONV forms."""
    traced = trace(task, workload)
    p, emitter, body = _scheduled(traced, name)
    forms = [(emitter, body)]
    if "convolution" in traced.graph.ops:
        token = conv_mode.set("direct")
        try:
            direct = trace(task, workload)
        finally:
            conv_mode.reset(token)
        dp, demitter, dbody = _scheduled(direct, name, "dtmp")
        forms.append((demitter, dbody))
        kernels = p.kernels + dp.kernels
    else:
        kernels = p.kernels
    params = emitter.io_params()
    scratch = [(t.numel, t.ctype) for e, _ in forms for _, t in e.temps]
    if len(params) + len(scratch) + 2 <= MAX_PARAMS:
        params += [q for e, _ in forms for q in e.temp_params()]
        bodies = [b for _, b in forms]
    else:  # the scratch buffers as one arena (lowering.arena)
        views = [arena_views(e.temps, e.plan.buffers) for e, _ in forms]
        params.append(f"uint8_t* restrict {ARENA}")
        bodies = [f"{v}\n{b}" for (v, _), (_, b) in zip(views, forms, strict=True)]
        scratch = [(max(n for _, n in views), "uint8_t")]
    body = f"#ifdef CONV_direct\n{bodies[1]}\n#else\n{bodies[0]}\n#endif" if len(forms) > 1 else bodies[0]
    rowcache = any(e.rowcache for e, _ in forms)
    knobs = set().union(*(e.w.knobs for e, _ in forms)) | ({"CONV"} if len(forms) > 1 else set())
    # stamp: changes when a parameter a prepacked operand reads is written (packing.emit_prepack)
    code = f"void {name}({', '.join([*params, 'int64_t stamp', 'int nt'])}) {{\n{body}\n}}\n"
    if rowcache:  # only where a row group's passes share a value: elsewhere it would change nothing
        knobs.add("ROWCACHE")
    return traced, p, emitter, scratch, code, kernels, knobs


# The knobs a candidate declares, in this order: those its functions read as the emitters wrote them (a knob
# the code never reads would only make the search evaluate the same binary again).
_KNOB_ORDER = ("ACC", "UNROLL", "VEC", "TILE", "ROWCACHE", "VMATH", *GEMM_KNOBS, "CONV", "PREPACK", "STREAM")


# An elementwise recurrence (an LSTM's cell state over its steps) is one expression as deep as the sequence is
# long, and the emitter recurses through it: deep enough for 512 steps, refused in one line beyond.
_DEPTH = 30_000


def generate(task: Task, threads: int | None = None) -> Generated:
    """The candidate for ``task`` (CPU, C with OpenMP); raises ``Unsupported`` with one line."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _DEPTH))
    try:
        return _generate(task, threads)
    except RecursionError:
        raise Unsupported(
            "an elementwise chain too deep to emit as one expression (a recurrence over many steps): "
            "shorten the sequence with --set"
        ) from None
    finally:
        sys.setrecursionlimit(limit)


def _generate(task: Task, threads: int | None) -> Generated:
    entries, functions, kinds, ops, fused, reads = [], [], [], [], None, set[str]()
    streamed, streamed_calls = 0, False  # STREAM's start: emit.FunctionEmitter.streamed, .streamed_calls
    # the gemm loop nests' multiply-adds; the convolutions among them with CONV=blocked, and theirs
    gemm_work, blocked_work, blocked = 0, 0, list[tuple[int, int]]()
    seen: dict[tuple[tuple[int, ...], ...], str] = {}
    for k, workload in enumerate(task.workloads):
        traced, p, emitter, scratch, code, kernels, knobs_read = _function(task, workload, f"kiln_w{k}")
        gemm_work, blocked_work = gemm_work + emitter.gemm_work, blocked_work + emitter.blocked_work
        blocked += emitter.blocked
        streamed, streamed_calls = max(streamed, emitter.streamed), streamed_calls or emitter.streamed_calls
        params = tuple(t.removeprefix("param:") for t in traced.tensors if t.startswith("param:"))
        inputs = traced.key
        param_shapes = tuple(
            s for s, t in zip(traced.input_shapes, traced.tensors, strict=True) if t.startswith("param:")
        )
        same = re.sub(rf"\bkiln_w{k}(?=[(_])", "kiln_w", code)  # the function's own names aside
        if inputs in seen:
            if seen[inputs] != same:
                raise Unsupported(
                    f"workloads {workload.name} and an earlier one have the same input shapes "
                    "but different computations"
                )
            continue
        seen[inputs] = same
        fused = fused if fused is not None else len(p.kernels)
        kinds += [kernel.kind for kernel in kernels]
        reads |= knobs_read
        ops += traced.graph.ops
        functions.append(code)
        entries.append(
            Entry(
                name=f"kiln_w{k}",
                signature=f"void({', '.join(emitter.signature_types([c for _, c in scratch]))})",
                input_shapes=inputs,
                params=params,
                param_shapes=param_shapes,
                outputs=tuple((tuple(s), o.ctype) for s, o in zip(traced.output_shapes, p.outputs, strict=True)),
                temps=tuple(scratch),
                single=traced.single,
                prepacked="PREPACK" in knobs_read,
                draws=tuple(
                    (t.removeprefix("draw:"), s, d)
                    for s, t, d in zip(traced.input_shapes, traced.tensors, traced.input_dtypes, strict=True)
                    if t.startswith("draw:")
                ),
            )
        )
    knobs = [k for k in _KNOB_ORDER if k in reads]
    rowcache, vmath, stream = "ROWCACHE" in reads, "VMATH" in reads, "STREAM" in reads
    unique_kinds = tuple(dict.fromkeys(kinds))
    summary = ", ".join(dict.fromkeys(ops)) or "no operations"
    cap = threads or default_threads()
    header = (
        HEADER
        + (GEMM_HEADER if "gemm" in kinds else "")
        + (ROWCACHE_HEADER if rowcache else "")
        + (VMATH_HEADER if vmath else "")
        + (STREAM_HEADER if stream else "")
    )
    # CONV=blocked was faster than implicit GEMM on every stride-1 convolution measured (1.5-3.8x, README);
    # its tiles are fitted to the convolutions' channels and width when they do most of the products' work
    # (the other products share MR and NR: RegNet's batch-folded 5x5 stage ran as fast at the fitted tiles)
    starts: dict[str, object] = {"CONV": "blocked"} if blocked else {}
    # STREAM=1 won on every cheap elementwise output measured that fits in the cache, and lost with an exp or
    # erf in the loop and on a 40 MB output (lowering.stream)
    if stream and not streamed_calls and streamed <= last_level_cache_bytes():
        starts["STREAM"] = 1
    if blocked and 2 * blocked_work >= gemm_work:
        starts["MR"], starts["NR"] = blocked_tiles(blocked, gemm_vocabulary()[0], simd_floats())
    c_source = header + "\n" + "\n".join(functions)
    size = len(c_source.encode())
    if size > MAX_SOURCE_BYTES:  # refused now, not by the build after the guard has started
        raise Unsupported(
            f"the generated C is {size / 2**20:.1f} MB, over the {MAX_SOURCE_BYTES >> 20} MB a candidate's source may "
            "be (every layer and every step of a recurrence is written out): choose smaller sizes with --set"
        )
    source = render(task, c_source, entries, knobs, cap, summary, simd_floats(), starts)
    return Generated(source, unique_kinds, tuple(["THREADS", *knobs, "FLAGS"]), tuple(dict.fromkeys(ops)), fused or 0)
