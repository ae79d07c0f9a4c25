"""A recurrent layer's loop over time: its source the same size for 8 steps or 8,000.

Each step is two parallel loops inside one OpenMP region: h W_hh^T + b_hh over blocks of gate
columns (W_hh stored transposed, so each h element multiplies a row of the block held in vector
registers: no horizontal sum per output), then PyTorch's cell over (batch row, piece of hidden
units), one vector loop per piece with VMATH's exp and tanh. It reads the input's share of the
gates computed before the loop (``Recurrence.gates``). The implicit barrier after each loop
orders the steps. At KernelBench's LSTM (6 layers, batch 2, 128 steps, 64 units, one thread)
a call took 6.0 ms with one dot per (row, gate column) and scalar libm calls, 2.4 ms so (eager 1.9).
"""

from __future__ import annotations

from typing import cast

from kernelkiln.lowering.body import Body
from kernelkiln.lowering.graph import Recurrence
from kernelkiln.lowering.loops import PARALLEL_MIN, Writer
from kernelkiln.lowering.pointwise import render_calling
from kernelkiln.lowering.schedule import Kernel

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


# gate columns per block of the step's product: its accumulators stay in vector registers (4 at 16 float lanes)
BLOCK = 64
# hidden units per piece of the cell's loop: a vector's worth at 16 lanes, the pieces shared among threads
PIECE = 16


def recurrence(w: Writer, buffers: dict[int, str], k: Kernel) -> None:
    """The loop over ``k``'s steps, writing h at each step, then the final h (and an LSTM's final c)."""
    r = cast(Recurrence, k.node)
    steps, batch, hidden = r.shape[0] - (2 if r.mode == "lstm" else 1), r.shape[1], r.shape[2]
    g = GATES[r.mode] * hidden
    gp = -(-g // BLOCK) * BLOCK  # the gate columns padded to whole blocks, the padding's weights zero
    ct, out = r.ctype, buffers[id(r)]
    rows = batch * hidden
    for name, size in (("wh", gp * hidden), ("bh", gp), ("hh", batch * gp), ("h", rows), ("c", rows)):
        w(f"{ct}* restrict {name} = ({ct}*)malloc(sizeof({ct}) * {size});")
    if batch * g * hidden >= PARALLEL_MIN:
        w("#pragma omp parallel num_threads(nt)")
    w.open("")
    w("#pragma omp for schedule(static)")
    w.open(f"for (int64_t j = 0; j < {gp}; ++j)")
    body = Body(buffers)
    bias = body.value(r.bias, ("j",)) if r.bias is not None else "0"
    w.body(body)
    w(f"bh[j] = j < {g} ? ({ct}){bias} : 0;")
    w.open(f"for (int64_t q = 0; q < {hidden}; ++q)")
    body = Body(buffers)
    weight = body.value(r.weight, ("j", "q"))
    w.body(body)
    w(f"wh[q * {gp} + j] = j < {g} ? ({ct}){weight} : 0;  /* W_hh transposed: a step reads gate columns in order */")
    w.close()
    w.close()
    w("#pragma omp for schedule(static)")
    w.open(f"for (int64_t i = 0; i < {rows}; ++i)")
    w(f"const int64_t b = i / {hidden}, j = i % {hidden};")
    body = Body(buffers)
    h0 = body.value(r.h0, ("b", "j"))
    c0 = body.value(r.c0, ("b", "j")) if r.c0 is not None else "0"
    w.body(body)
    w(f"h[i] = ({ct}){h0};")
    w(f"c[i] = ({ct}){c0};")
    w.close()
    w.open(f"for (int64_t s = 0; s < {steps}; ++s)")
    w(f"const int64_t t = {f'{steps - 1} - s' if r.reverse else 's'};")
    # hh = h W_hh^T + b_hh, a block of gate columns at a time: each h element times a row of the block
    w("#pragma omp for schedule(static)")
    w.open(f"for (int64_t jb = 0; jb < {gp}; jb += {BLOCK})")
    w.open(f"for (int64_t b = 0; b < {batch}; ++b)")
    w(f"{ct} acc[{BLOCK}];")
    w(f"for (int64_t jj = 0; jj < {BLOCK}; ++jj) acc[jj] = bh[jb + jj];")
    w.open(f"for (int64_t q = 0; q < {hidden}; ++q)")
    w(f"const {ct} hq = h[b * {hidden} + q];")
    w(f"const {ct}* restrict wq = wh + q * {gp} + jb;")
    w("#pragma omp simd")
    w(f"for (int64_t jj = 0; jj < {BLOCK}; ++jj) acc[jj] += hq * wq[jj];")
    w.close()
    w(f"for (int64_t jj = 0; jj < {BLOCK}; ++jj) hh[b * {gp} + jb + jj] = acc[jj];")
    w.close()
    w.close()
    # the cell, over (batch row, piece of hidden units), each piece one vector loop
    pieces = -(-hidden // PIECE)
    w("#pragma omp for collapse(2) schedule(static)")
    w.open(f"for (int64_t b = 0; b < {batch}; ++b)")
    w.open(f"for (int64_t p = 0; p < {pieces}; ++p)")
    end = (
        f"p * {PIECE} + {PIECE}"
        if hidden % PIECE == 0
        else f"((p + 1) * {PIECE} < {hidden} ? (p + 1) * {PIECE} : {hidden})"
    )
    w("#pragma omp simd")
    w.open(f"for (int64_t j = p * {PIECE}; j < {end}; ++j)")
    w(f"const int64_t i = b * {hidden} + j;")
    body = Body(buffers)
    x = [body.value(r.gates, ("t", "b", f"{n * hidden} + j")) for n in range(GATES[r.mode])]
    w.body(body)
    y = [f"(({ct}){x[n]} + hh[b * {gp} + {n * hidden} + j])" for n in range(GATES[r.mode])]

    def sigmoid(v: str) -> str:
        return _op("sigmoid", v)

    def tanh(v: str) -> str:
        return _op("tanh", v)

    def _op(op: str, v: str) -> str:  # pointwise's own form, VMATH's inline function where it has one
        expr, inlined = render_calling(op, [v], ct, ())
        if inlined:
            w.reads("VMATH")
        return expr

    if r.mode == "lstm":
        w(f"const {ct} ig = {sigmoid(y[0])}, fg = {sigmoid(y[1])}, og = {sigmoid(y[3])};")
        w(f"const {ct} gg = {tanh(y[2])};")
        w("c[i] = fg * c[i] + ig * gg;")
        w(f"h[i] = og * {tanh('c[i]')};")
    elif r.mode == "gru":
        hn = f"hh[b * {gp} + {2 * hidden} + j]"
        w(f"const {ct} rg = {sigmoid(y[0])}, zg = {sigmoid(y[1])};")
        w(f"const {ct} ng = {tanh(f'({ct}){x[2]} + rg * {hn}')};")
        w(f"h[i] = (({ct})1 - zg) * ng + zg * h[i];")
    elif r.mode == "rnn_tanh":
        w(f"h[i] = {tanh(y[0])};")
    else:
        w(f"h[i] = {y[0]} > 0 ? {y[0]} : ({ct})0;")
    w(f"{out}[t * {rows} + i] = h[i];")
    w.close()
    w.close()
    w.close()
    w.close()
    w("#pragma omp for schedule(static)")
    w.open(f"for (int64_t i = 0; i < {rows}; ++i)")
    w(f"{out}[{steps * rows} + i] = h[i];")
    if r.mode == "lstm":
        w(f"{out}[{(steps + 1) * rows} + i] = c[i];")
    w.close()
    w.close()
    for name in ("wh", "bh", "hh", "h", "c"):
        w(f"free({name});")
