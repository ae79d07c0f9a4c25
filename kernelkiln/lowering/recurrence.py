"""A recurrent layer's loop over time: its source the same size for 8 steps or 8,000.

Each step is two parallel loops inside one OpenMP region: h W_hh^T + b_hh for every
(batch row, gate column), then PyTorch's cell for every (batch row, hidden unit), which
reads the input's share of the gates computed before the loop (``Recurrence.gates``).
The implicit barrier after each loop orders the steps.
"""

from __future__ import annotations

from typing import cast

from kernelkiln.lowering.body import Body
from kernelkiln.lowering.graph import Recurrence
from kernelkiln.lowering.loops import PARALLEL_MIN, Writer
from kernelkiln.lowering.schedule import Kernel

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def recurrence(w: Writer, buffers: dict[int, str], k: Kernel) -> None:
    """The loop over ``k``'s steps, writing h at each step, then the final h (and an LSTM's final c)."""
    r = cast(Recurrence, k.node)
    steps, batch, hidden = r.shape[0] - (2 if r.mode == "lstm" else 1), r.shape[1], r.shape[2]
    g = GATES[r.mode] * hidden
    ct, out = r.ctype, buffers[id(r)]
    fn = "" if ct == "double" else "f"
    rows = batch * hidden
    for name, size in (("wh", g * hidden), ("bh", g), ("hh", batch * g), ("h", rows), ("c", rows)):
        w(f"{ct}* restrict {name} = ({ct}*)malloc(sizeof({ct}) * {size});")
    if batch * g * hidden >= PARALLEL_MIN:
        w("#pragma omp parallel num_threads(nt)")
    w.open("")
    w("#pragma omp for schedule(static)")
    w.open(f"for (int64_t j = 0; j < {g}; ++j)")
    body = Body(buffers)
    bias = body.value(r.bias, ("j",)) if r.bias is not None else "0"
    w.body(body)
    w(f"bh[j] = ({ct}){bias};")
    w.open(f"for (int64_t q = 0; q < {hidden}; ++q)")
    body = Body(buffers)
    weight = body.value(r.weight, ("j", "q"))
    w.body(body)
    w(f"wh[j * {hidden} + q] = ({ct}){weight};")
    w.close()
    w.close()
    _units(w, rows, hidden)
    body = Body(buffers)
    h0 = body.value(r.h0, ("b", "j"))
    c0 = body.value(r.c0, ("b", "j")) if r.c0 is not None else "0"
    w.body(body)
    w(f"h[i] = ({ct}){h0};")
    w(f"c[i] = ({ct}){c0};")
    w.close()
    w.open(f"for (int64_t s = 0; s < {steps}; ++s)")
    w(f"const int64_t t = {f'{steps - 1} - s' if r.reverse else 's'};")
    w("#pragma omp for schedule(static)")
    w.open(f"for (int64_t j = 0; j < {g}; ++j)")
    w(f"const {ct}* restrict wj = wh + j * {hidden};")
    w.open(f"for (int64_t b = 0; b < {batch}; ++b)")
    w(f"{ct} acc = bh[j];")
    w(f"const {ct}* restrict hb = h + b * {hidden};")
    w("#pragma omp simd reduction(+:acc)")
    w(f"for (int64_t q = 0; q < {hidden}; ++q) acc += hb[q] * wj[q];")
    w(f"hh[b * {g} + j] = acc;")
    w.close()
    w.close()
    _units(w, rows, hidden)
    body = Body(buffers)
    x = [body.value(r.gates, ("t", "b", f"{n * hidden} + j")) for n in range(GATES[r.mode])]
    w.body(body)
    y = [f"(({ct}){x[n]} + hh[b * {g} + {n * hidden} + j])" for n in range(GATES[r.mode])]

    def sigmoid(v: str) -> str:
        return f"(({ct})1 / (({ct})1 + exp{fn}(-{v})))"

    if r.mode == "lstm":
        w(f"const {ct} ig = {sigmoid(y[0])}, fg = {sigmoid(y[1])}, og = {sigmoid(y[3])};")
        w(f"const {ct} gg = tanh{fn}({y[2]});")
        w("c[i] = fg * c[i] + ig * gg;")
        w(f"h[i] = og * tanh{fn}(c[i]);")
    elif r.mode == "gru":
        hn = f"hh[b * {g} + {2 * hidden} + j]"
        w(f"const {ct} rg = {sigmoid(y[0])}, zg = {sigmoid(y[1])};")
        w(f"const {ct} ng = tanh{fn}(({ct}){x[2]} + rg * {hn});")
        w(f"h[i] = (({ct})1 - zg) * ng + zg * h[i];")
    elif r.mode == "rnn_tanh":
        w(f"h[i] = tanh{fn}({y[0]});")
    else:
        w(f"h[i] = {y[0]} > 0 ? {y[0]} : ({ct})0;")
    w(f"{out}[t * {rows} + i] = h[i];")
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


def _units(w: Writer, rows: int, hidden: int) -> None:
    """Open a parallel loop over every (batch row b, hidden unit j), flat as i."""
    w("#pragma omp for schedule(static)")
    w.open(f"for (int64_t i = 0; i < {rows}; ++i)")
    w(f"const int64_t b = i / {hidden}, j = i % {hidden};")
