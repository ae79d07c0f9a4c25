"""PyTorch's recurrent layers (nn.LSTM, nn.GRU, nn.RNN) traced whole, lowered as loops over time.

Traced as they are, a layer's steps are written out one by one: the C grows with the
sequence (13.7 MB for KernelBench's 6-layer GRU over 512 steps). While tracing,
``recurrent_layers()`` routes ``torch.lstm``, ``torch.gru``, ``torch.rnn_tanh`` and
``torch.rnn_relu`` (what the modules' forward calls) through one custom op,
``kernelkiln::recurrence``, that computes exactly what they compute and is recorded as one
node; its handler lowers each layer and direction to the input's product with W_ih (the
GEMM kernel, every step at once) and a ``Recurrence`` (one loop over time).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from kernelkiln.lowering import views as V
from kernelkiln.lowering.aten import handles, node, pointwise
from kernelkiln.lowering.aten_matmul import matmul
from kernelkiln.lowering.graph import Concat, Node, Recurrence, Unsupported
from kernelkiln.lowering.recurrence import GATES

_MODES = tuple(GATES)
_defined = threading.Lock()
_op: Any = None


def _recurrence_op() -> Any:
    """``torch.ops.kernelkiln.recurrence``, defined on first use (one definition per process)."""
    global _op
    with _defined:
        if _op is None:

            @torch.library.custom_op("kernelkiln::recurrence", mutates_args=())
            def run(
                x: torch.Tensor,
                hx: list[torch.Tensor],
                params: list[torch.Tensor],
                mode: str,
                has_biases: bool,
                num_layers: int,
                bidirectional: bool,
                batch_first: bool,
            ) -> list[torch.Tensor]:
                fn = getattr(torch._VF, mode)
                state: Any = tuple(hx) if mode == "lstm" else hx[0]
                with torch._C.DisableTorchFunction():  # output, h_n (and an LSTM's c_n)
                    out = fn(x, state, params, has_biases, num_layers, 0.0, False, bidirectional, batch_first)
                return [t.clone() for t in out]

            @run.register_fake
            def _(x: torch.Tensor, hx: list[torch.Tensor], params: list[torch.Tensor], *options: Any) -> list[Any]:
                directions = 2 if options[3] else 1  # (mode, has_biases, num_layers, bidirectional, batch_first)
                return [x.new_empty((*x.shape[:-1], directions * hx[0].shape[-1]))] + [h.new_empty(h.shape) for h in hx]

            _op = torch.ops.kernelkiln.recurrence
    return _op


class _Routed(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        # the data-and-batch-sizes form (a PackedSequence) has a tensor third; it stays as it is
        if name in _MODES and len(args) == 9 and not kwargs and isinstance(args[2], (list, tuple)):
            x, hx, params, has_biases, layers, dropout, train, bidirectional, batch_first = args
            if train and dropout:
                raise Unsupported("a recurrent layer with dropout in training mode draws at random at each call")
            state = list(hx) if isinstance(hx, (list, tuple)) else [hx]
            out = _recurrence_op()(x, state, list(params), name, has_biases, layers, bidirectional, batch_first)
            return tuple(out)  # as torch's: output, h_n (and an LSTM's c_n)
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def recurrent_layers() -> Iterator[None]:
    """While tracing: recurrent layers recorded as one ``kernelkiln::recurrence`` node each call."""
    _recurrence_op()
    with _Routed():
        yield


@handles("recurrence")
def _recurrence(args: list[Any], kwargs: dict[str, Any], meta: Any) -> tuple[Node, ...]:
    x, hx, params, mode, has_biases, layers, bidirectional, batch_first = args
    x, hx, params = node(x), [node(h) for h in hx], [node(p) for p in params]
    directions = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    if len(params) != layers * directions * per:
        raise Unsupported(f"an {mode.upper()} with a projection (proj_size): no lowering yet")
    if len(x.shape) != 3:
        raise Unsupported(f"an unbatched {mode.upper()} input of shape {x.shape}")
    if x.ctype not in ("float", "double"):
        raise Unsupported(f"an {mode.upper()} over {x.ctype}")
    seq = V.transpose(x, 0, 1) if batch_first else x  # (T, B, I)
    steps, batch = seq.shape[0], seq.shape[1]
    hidden = hx[0].shape[-1]
    finals: list[list[Node]] = [[] for _ in hx]
    for layer in range(layers):
        outs = []
        for d in range(directions):
            k = (layer * directions + d) * per
            w_ih, w_hh = params[k], params[k + 1]
            b_ih, b_hh = (params[k + 2], params[k + 3]) if has_biases else (None, None)
            width = w_ih.shape[0]
            flat = V.reshape(seq, (steps * batch, seq.shape[2]))
            gates = matmul(flat, V.transpose(w_ih, 0, 1))
            if b_ih is not None:
                gates = pointwise("add", [gates, b_ih], x.ctype)
            at = layer * directions + d
            r = Recurrence(
                (steps + len(hx), batch, hidden),
                x.ctype,
                mode=mode,
                gates=V.reshape(gates, (steps, batch, width)),
                h0=V.select(hx[0], 0, at),
                c0=V.select(hx[1], 0, at) if mode == "lstm" else None,
                weight=w_hh,
                bias=b_hh,
                reverse=d == 1,
            )
            outs.append(V.slice_(r, 0, 0, steps))
            for n, final in enumerate(finals):
                final.append(V.slice_(r, 0, steps + n, steps + n + 1))
        seq = (
            outs[0]
            if directions == 1
            else Concat((steps, batch, directions * hidden), x.ctype, parts=tuple(outs), dim=2)
        )
    output = V.transpose(seq, 0, 1) if batch_first else seq
    stacked = [f[0] if len(f) == 1 else Concat((len(f), batch, hidden), x.ctype, parts=tuple(f), dim=0) for f in finals]
    return (output, *stacked)
