"""Kernels → C: one function per workload, every size a constant, OpenMP across rows.

The tuning knobs are C macros the candidate passes as ``-D`` flags: ``ACC`` independent
accumulators per reduction, ``UNROLL`` of the innermost loops, ``VEC`` a simd length
(0: the compiler's choice), ``TILE`` the block of columns or elements one thread takes,
``ROWCACHE`` whether a row group keeps the values its passes share (``rowcache``), ``STREAM``
whether an elementwise output nothing reads again is written with non-temporal stores
(``stream``); the thread count is an argument (the ``THREADS`` knob capped at the guard's threads).
"""

from __future__ import annotations

import itertools
import math
import re
from typing import cast

from kernelkiln.lowering.body import Body
from kernelkiln.lowering.gemm import emit_gemm
from kernelkiln.lowering.graph import FLOATS, Graph, Matmul, Node, Reduce, linear
from kernelkiln.lowering.loops import (
    FLAT,
    INIT,
    LOOP,
    OMP,
    PARALLEL_MIN,
    UNROLL,
    Writer,
    combine,
    decompose,
    flat_position,
    open_loops,
    parallel,
    simd_reduce,
    split_index,
    var,
)
from kernelkiln.lowering.others import column, scan, window
from kernelkiln.lowering.pointwise import literal
from kernelkiln.lowering.recurrence import recurrence
from kernelkiln.lowering.residue import open_walk
from kernelkiln.lowering.rowcache import RowCache, row_cache
from kernelkiln.lowering.schedule import Kernel, Plan, needs_buffer, read_back

_CALLS = re.compile(r"\b(kiln_)?(exp|expm1|erf|tanh|log|log1p|pow|sin|cos)f?\(")


def _scaled(r: Reduce, value: str) -> str:
    return value if r.scale == 1.0 else f"{value} * {literal(r.scale, r.ctype)}"


class FunctionEmitter:
    """The C function computing one workload's plan."""

    def __init__(self, graph: Graph, plan: Plan, name: str):
        self.graph, self.plan, self.name = graph, plan, name
        self.stored = needs_buffer(plan, graph.outputs)
        # a reduction a row group keeps in a register needs no scratch buffer
        self.temps = [(k, t) for k, t in enumerate(plan.temps) if id(t) in self.stored or not isinstance(t, Reduce)]
        self.w = Writer()
        self.names = itertools.count(1)
        self.cache: RowCache | None = None  # the row group being emitted keeps shared values (ROWCACHE=1)
        self.rowcache = False  # some row group has a ROWCACHE=1 form
        self.read_back = read_back(plan)
        # STREAM's start (lowering.stream): the largest streamed output, and whether any streamed loop calls
        # a transcendental function
        self.streamed, self.streamed_calls = 0, False
        # the gemm loop nests' multiply-adds; the convolutions among them with a CONV=blocked form, (channels,
        # width), and their multiply-adds
        self.gemm_work = self.blocked_work = 0
        self.blocked: list[tuple[int, int]] = []

    def signature_types(self, scratch: list[str]) -> list[str]:
        """The C function's argument types, its scratch buffers' C types ``scratch`` (this plan's, maybe with
        another's, or an arena's)."""
        types = [f"const {i.ctype}*" for i in self.graph.inputs]
        types += [f"{o.ctype}*" for o in self.plan.outputs] + [f"{t}*" for t in scratch]
        return [*types, "int64_t", "int"]

    def io_params(self) -> list[str]:
        """The C parameters of the inputs and outputs (the scratch buffers follow: ``temp_params``)."""
        params = [f"const {i.ctype}* restrict in{i.position}" for i in self.graph.inputs]
        return params + [f"{o.ctype}* restrict out{k}" for k, o in enumerate(self.plan.outputs)]

    def temp_params(self) -> list[str]:
        return [f"{t.ctype}* restrict {self.plan.buffers[id(t)]}" for _, t in self.temps]

    def body(self) -> str:
        """The statements computing every kernel of the plan, in order."""
        for n, kernel in enumerate(self.plan.kernels):
            self.w(f"/* {kernel.kind} over {list(kernel.shape)} */")
            self.w.open("")
            if kernel.kind == "gemm":
                mm = cast(Matmul, kernel.node)
                patches = emit_gemm(self.w, self.plan.buffers, mm, kernel.writes, self.names, f"{self.name}_g{n}")
                work = math.prod(mm.shape) * mm.a.shape[-1]
                self.gemm_work += work
                if patches is not None:
                    self.blocked.append((mm.shape[-2], patches.shape[-1]))
                    self.blocked_work += work
            else:
                getattr(self, f"_{kernel.kind}")(kernel)
            self.w.close()
        return "\n".join(self.w.lines)

    def _body(
        self, scalars: dict[int, str] | None = None, row: dict[int, str] | None = None, root: Node | None = None
    ) -> Body:
        """A loop body; in a pass of a row group that keeps values (``root``: the pass's), it reads them."""
        cached = self.cache.reads(root) if self.cache is not None and root is not None else None
        return Body(self.plan.buffers, scalars, row, names=self.names, cached=cached)

    def _emit_body(self, body: Body, root: Node) -> None:
        """``body``'s statements, then the stores of the values its pass keeps for later passes."""
        self.w.body(body)
        if self.cache is not None:
            for line in self.cache.stores(root, body):
                self.w(line)

    def _arg_at(self, r: Reduce, shape: tuple[int, ...], scalars: dict[int, str], row: dict[int, str]) -> str:
        """Emit the statements of ``r``'s argument at the loops' index; its value's C expression."""
        body = self._body(scalars, row, r)
        v = body.value(r.arg, tuple(var(shape, d) for d in range(len(shape))))
        self._emit_body(body, r)
        return v

    # -- row groups ------------------------------------------------------------------------
    def _row(self, k: Kernel) -> None:
        w, shape = self.w, k.shape
        if not shape:
            self._scalar_row(k)
            return
        outer = [d for d in range(len(shape)) if d not in k.dims]
        inner = [d for d in range(len(shape)) if d in k.dims]
        rows = math.prod(shape[d] for d in outer)
        if not k.reductions:
            self._pointwise(k, outer, inner[-1])
            return
        if rows == 1:
            self._whole(k, inner)
            return
        row = {d: var(shape, d) for d in outer if shape[d] != 1}
        cache = row_cache(k, self.plan.buffers, row)
        start = len(w.lines)
        self._rows(k, outer, inner, row, rows)
        if cache is None:
            return
        plain = w.lines[start:]  # ROWCACHE=0: each pass computes its values (today's code)
        del w.lines[start:]
        w("#if ROWCACHE")
        self.cache, self.rowcache = cache, True
        try:
            self._rows(k, outer, inner, row, rows)
        finally:
            self.cache = None
        w("#else")
        w.lines += plain
        w("#endif")

    def _rows(self, k: Kernel, outer: list[int], inner: list[int], row: dict[int, str], rows: int) -> None:
        """The row loop: each reduction in a pass over the row, then the writes; threads take rows."""
        w, shape, cache = self.w, k.shape, self.cache
        pragma = parallel(math.prod(shape))
        if cache is not None:  # each thread takes its scratch rows once, then its share of the rows
            if pragma:
                w("#pragma omp parallel num_threads(nt)")
            w.open("")
            cache.allocate(w)
            if pragma:
                w("#pragma omp for schedule(static)")
        elif pragma:
            w(pragma)
        w.open(f"for (int64_t o = 0; o < {rows}; ++o)")
        decompose(w, shape, outer, "o")
        scalars: dict[int, str] = {}
        for n, r in enumerate(k.reductions):
            self._reduce_row(r, shape, inner, scalars, row, f"r{n}")
        for out in k.writes:
            self._write(out, shape, inner, scalars, row)
        w.close()
        if cache is not None:
            w.close()

    def _reduce_row(
        self,
        r: Reduce,
        shape: tuple[int, ...],
        inner: list[int],
        scalars: dict[int, str],
        row: dict[int, str],
        name: str,
    ) -> None:
        w = self.w
        live = [d for d in inner if shape[d] != 1]
        if r.op in ("argmax", "argmin"):
            self._arg_reduce(r, shape, live, scalars, row, name)
            return
        acc = r.ctype
        if not live:
            v = self._arg_at(r, shape, scalars, row)
            w(f"const {acc} {name} = {_scaled(r, f'({acc}){v}')};")
        else:
            w.reads("ACC")
            w("#if ACC > 1")
            w(f"{acc} {name}_l[ACC];")
            w(f"for (int a = 0; a < ACC; ++a) {name}_l[a] = {INIT[r.op]};")
            open_loops(w, shape, live[:-1])
            last = live[-1]
            w.open(f"for (int64_t j = 0; j < {shape[last]}; j += ACC)")
            w.pragma(UNROLL)
            w.open(f"for (int a = 0; a < ACC && j + a < {shape[last]}; ++a)")
            w(f"const int64_t i{last} = j + a;")
            v = self._arg_at(r, shape, scalars, row)
            w(f"{name}_l[a] = {combine(r.op, f'{name}_l[a]', f'({acc}){v}')};")
            w.close()
            w.close()
            for _ in live[:-1]:
                w.close()
            w(f"{acc} {name}_c = {name}_l[0];")
            w(f"for (int a = 1; a < ACC; ++a) {name}_c = {combine(r.op, f'{name}_c', f'{name}_l[a]')};")
            w(f"const {acc} {name} = {_scaled(r, f'{name}_c')};")
            w("#else")
            w(f"{acc} {name}_a = {INIT[r.op]};")
            open_loops(w, shape, live, simd_reduce(OMP[r.op], f"{name}_a"))
            v = self._arg_at(r, shape, scalars, row)
            w(f"{name}_a = {combine(r.op, f'{name}_a', f'({acc}){v}')};")
            for _ in live:
                w.close()
            w(f"const {acc} {name} = {_scaled(r, f'{name}_a')};")
            w("#endif")
        scalars[id(r)] = name
        if id(r) in self.stored:
            idx = tuple("0" if d in inner else var(shape, d) for d in range(len(shape)))
            w(f"{self.plan.buffers[id(r)]}[{linear(idx, r.shape)}] = {name};")

    def _arg_reduce(
        self,
        r: Reduce,
        shape: tuple[int, ...],
        live: list[int],
        scalars: dict[int, str],
        row: dict[int, str],
        name: str,
    ) -> None:
        w = self.w
        vt = r.arg.ctype if r.arg.ctype in FLOATS else "double"
        w(f"{vt} {name}_v = {INIT[r.op]}; int64_t {name} = 0;")
        if r.arg.ctype not in FLOATS:
            w(f"{name}_v = {'-' if r.op == 'argmax' else ''}INFINITY;")
        open_loops(w, shape, live)
        v = self._arg_at(r, shape, scalars, row)
        position = flat_position(shape, live)
        better = ">" if r.op == "argmax" else "<"
        w(
            f"if (({vt}){v} {better} {name}_v || ({v} != {v} && {name}_v == {name}_v)) "
            f"{{ {name}_v = ({vt}){v}; {name} = {position}; }}"
        )
        for _ in live:
            w.close()
        scalars[id(r)] = name
        if id(r) in self.stored:
            idx = tuple("0" if d in live or shape[d] == 1 else var(shape, d) for d in range(len(shape)))
            w(f"{self.plan.buffers[id(r)]}[{linear(idx, r.shape)}] = {name};")

    def _write(
        self,
        out: Node,
        shape: tuple[int, ...],
        inner: list[int],
        scalars: dict[int, str],
        row: dict[int, str],
        threads: str | None = None,
    ) -> None:
        """``out`` over the ``inner`` dims; ``threads``: a parallel-for pragma for the outermost loop."""
        w = self.w
        live = [d for d in inner if shape[d] != 1]
        if threads and len(live) == 1:  # one loop takes one pragma: threads and simd lanes together
            opened = open_loops(w, shape, live, threads.replace("parallel for", "parallel for simd", 1))
        else:
            if threads and live:
                w(threads)
            opened = open_loops(w, shape, live, LOOP)
        body = self._body(scalars, row, out)
        idx = tuple(var(shape, d) for d in range(len(shape)))
        v = body.value_of(out, idx)
        self._emit_body(body, out)
        w(f"{self.plan.buffers[id(out)]}[{linear(idx, shape)}] = {v};")
        for _ in range(opened):
            w.close()

    def _whole(self, k: Kernel, inner: list[int]) -> None:
        """Reductions of everything to one value: threads split the outermost reduced dim."""
        w, shape = self.w, k.shape
        live = [d for d in inner if shape[d] != 1]
        scalars: dict[int, str] = {}
        for n, r in enumerate(k.reductions):
            name = f"r{n}"
            if r.op in OMP and live and math.prod(shape) >= PARALLEL_MIN:
                acc = r.ctype
                w(f"{acc} {name}_a = {INIT[r.op]};")
                w(f"#pragma omp parallel for num_threads(nt) schedule(static) reduction({OMP[r.op]}:{name}_a)")
                w.open(f"for (int64_t i{live[0]} = 0; i{live[0]} < {shape[live[0]]}; ++i{live[0]})")
                opened = open_loops(w, shape, live[1:], simd_reduce(OMP[r.op], f"{name}_a"))
                v = self._arg_at(r, shape, scalars, {})
                w(f"{name}_a = {combine(r.op, f'{name}_a', f'({acc}){v}')};")
                for _ in range(opened + 1):
                    w.close()
                w(f"const {acc} {name} = {_scaled(r, f'{name}_a')};")
                scalars[id(r)] = name
                if id(r) in self.stored:
                    w(f"{self.plan.buffers[id(r)]}[0] = {name};")
            else:
                self._reduce_row(r, shape, inner, scalars, {}, name)
        for out in k.writes:
            self._write(out, shape, inner, scalars, {}, parallel(math.prod(shape)))

    def _scalar_row(self, k: Kernel) -> None:
        scalars: dict[int, str] = {}
        for n, r in enumerate(k.reductions):
            self._reduce_row(r, (), [], scalars, {}, f"r{n}")
        for out in k.writes:
            self._write(out, (), [], scalars, {})

    def _pointwise(self, k: Kernel, outer: list[int], last: int) -> None:
        """Writes only: threads take blocks of TILE elements of the innermost loop, which walks the trailing
        dims as one where every read and write finds its element from that walk's position alone (a BatchNorm
        over 32x32 images: 1024-element rows with the channel's values fixed, not 32-element ones)."""
        w, shape = self.w, k.shape
        start = len(w.lines)
        for first in [d for d in outer if shape[d] != 1] + [last]:  # the longest run first
            run = [d for d in range(first, last + 1) if shape[d] != 1] or [last]
            self._pointwise_loop(k, [d for d in outer if d < first], run)
            if len(run) == 1 or not re.search(rf"\b{FLAT}\)*[/%]", "\n".join(w.lines[start:])):
                return
            del w.lines[start:]  # an index divides the walk's position: a shorter run

    def _pointwise_loop(self, k: Kernel, outer: list[int], run: list[int]) -> None:
        w, shape = self.w, k.shape
        rows = math.prod(shape[d] for d in outer)
        n = math.prod(shape[d] for d in run)
        walk = f"i{run[0]}" if len(run) == 1 else FLAT
        at = split_index(shape, run, walk)
        w.reads("TILE")
        w(f"const int64_t nb = ({n} + TILE - 1) / TILE;")
        pragma = parallel(math.prod(shape))
        if pragma:
            w(pragma)
        w.open(f"for (int64_t ob = 0; ob < {rows} * nb; ++ob)")
        w("const int64_t o = ob / nb, b = (ob % nb) * TILE, e = KILN_MIN(b + TILE, (int64_t)" + str(n) + ");")
        decompose(w, shape, outer, "o")
        idx = tuple(at.get(d, var(shape, d)) for d in range(len(shape)))
        streams = False
        for out in k.writes:
            buffer = self.plan.buffers[id(out)]
            stream = out.ctype == "float" and buffer.startswith("out") and id(out) not in self.read_back
            if stream:  # the walk is the trailing dims: the block is contiguous from the walk at b
                streams = True
                w("#if STREAM")
                w.open("")
                w("float kiln_sb[TILE] __attribute__((aligned(64)));")
                first = len(w.lines)
                self._pointwise_store(out, idx, walk, f"kiln_sb[{walk} - b]")
                self.streamed = max(self.streamed, out.numel * 4)
                self.streamed_calls = self.streamed_calls or bool(_CALLS.search("\n".join(w.lines[first:])))
                start = re.sub(rf"\b{walk}\b", "b", linear(idx, shape))
                w(f"kiln_stream({buffer} + {start}, kiln_sb, e - b);")
                w.reads("STREAM")
                w.close()
                w("#else")
            self._pointwise_store(out, idx, walk, f"{buffer}[{linear(idx, shape)}]")
            if stream:
                w("#endif")
        w.close()
        if streams:
            w("#if STREAM")
            w("kiln_stream_fence();")
            w("#endif")

    def _pointwise_store(self, out: Node, idx: tuple[str, ...], walk: str, target: str) -> None:
        """The walk over ``b..e`` writing ``out`` (``lowering.residue``: one loop, or one per residue)."""
        body = self._body()
        v, loops = open_walk(self.w, body, body.value_of(out, idx), walk)
        self.w.body(body)
        self.w(f"{target} = {v};")
        for _ in range(loops):
            self.w.close()

    def _column(self, k: Kernel) -> None:
        column(self.w, self.plan.buffers, k)

    def _scan(self, k: Kernel) -> None:
        scan(self.w, self.plan.buffers, k)

    def _window(self, k: Kernel) -> None:
        window(self.w, self.plan.buffers, k)

    def _recurrence(self, k: Kernel) -> None:
        recurrence(self.w, self.plan.buffers, k)
