"""The least work a workload's reference implies: the FLOPs it performs and the bytes it must move.

A task's KILN metadata may give ``flops`` and ``bytes``; a plain KernelBench file gives neither,
so they are derived once at load from one forward on the meta device (no data, no compute, as
kernelkiln.task.reference_calls runs it):

- FLOPs are what torch's ``FlopCounterMode`` counts: matrix products, convolutions and
  attention, the work that can bound a kernel by compute. Elementwise work is left out; the
  bytes bound it.
- Bytes are compulsory traffic: every input, parameter and buffer read once and every output
  written once, a tensor that is both (an in-place output, a view of an input) counted once.

Every kernel of the workload performs those FLOPs and moves at least those bytes, so the
roofline bound built on them (kernelkiln.platforms.sol) is a lower bound on its time. A
forward the meta device cannot run (an op without a meta kernel, a value read) gives no figures.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelkiln.task.model import Task, Workload


def derived_figures(task: Task, workload: Workload) -> tuple[float | None, float | None]:
    """(FLOPs, bytes) of ``workload``'s reference from a meta-device forward; None for a figure it cannot give."""
    from torch.utils._pytree import tree_leaves
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with warnings.catch_warnings(), task.built(workload, "meta") as (model, inputs):
            warnings.simplefilter("ignore")
            counter = FlopCounterMode(display=False)
            with counter:
                outputs = tree_leaves(model(*inputs))
    except Exception:  # any failure means "unknown", as for reference_calls
        return None, None
    read = _unique([*inputs, *model.parameters(), *model.buffers()])
    known = {id(t) for t in read}
    written = [t for t in _unique(outputs) if id(t) not in known and id(t._base) not in known]
    flops = float(counter.get_total_flops())
    total = float(sum(t.numel() * t.element_size() for t in read + written))
    return (flops or None), (total or None)


def with_derived_figures(task: Task, workloads: list[Workload]) -> list[Workload]:
    """``workloads`` with FLOPs and bytes derived where neither was given (both or none: a KILN figure stands)."""
    out = []
    for w in workloads:
        if w.flops is None and w.bytes is None:
            flops, nbytes = derived_figures(task, w)
            w = replace(w, flops=flops, bytes=nbytes)
        out.append(w)
    return out


def _unique(values: list[Any]) -> list[Any]:
    import torch

    seen: dict[int, Any] = {}
    for v in values:
        if isinstance(v, torch.Tensor):
            seen.setdefault(id(v), v)
    return list(seen.values())
