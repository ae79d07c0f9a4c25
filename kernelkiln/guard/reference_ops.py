"""Which torch ops a computation calls (kernelkiln.task.calls records them), in the guard's spelling.

The reference's compute ops become the candidate's forbidden ops (a task may widen or
narrow the list); plumbing (allocation, shape queries, views) is always allowed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch

from kernelkiln.errors import UserError
from kernelkiln.guard.aliases import canonical_ops, spelling
from kernelkiln.task.calls import record_calls

if TYPE_CHECKING:
    from kernelkiln.task.model import Task

# Ops that move or describe data without computing the task's result.
PLUMBING = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "new_empty",
        "new_zeros",
        "new_ones",
        "new_full",
        "size",
        "dim",
        "numel",
        "shape",
        "stride",
        "storage_offset",
        "contiguous",
        "is_contiguous",
        "view",
        "view_as",
        "reshape",
        "reshape_as",
        "flatten",
        "unsqueeze",
        "squeeze",
        "expand",
        "expand_as",
        "data_ptr",
        "dtype",
        "device",
        "to",
        "cpu",
        "float",
        "double",
        "half",
        "bfloat16",
        "getitem",
        "setitem",
        "len",
        "repr",
        "format",
        "bool",
        "int",
        "index",
        "detach",
        "requires_grad",
        "item",
        "tolist",
        "copy",
        "fill",
        "zero",
        "get_device",
        "element_size",
        "is_floating_point",
        "is_complex",
        "layout",
        "is_cuda",
        "grad",
        "grad_fn",
        "ndim",
        "nbytes",
        "itemsize",
        "untyped_storage",
        "storage",
        "type",
        "names",
        "is_sparse",
        "is_quantized",
        "is_meta",
        "is_nested",
        "data",
        "output_nr",
        "version",
        "get",
        "iter",
        "hash",
        "eq_",
        "clone",
        "numpy",
        "T",
        "mT",
        "t",
        "transpose",
        "permute",
        "unbind",
        "split",
        "chunk",
        "narrow",
        "select",
        "as_strided",
        "is_leaf",
        "retains_grad",
        "is_mkldnn",
        "nelement",
        # random draws compute nothing from the inputs: a candidate makes the reference's draws (an LSTM's
        # initial state) from the same generator state (worker.harness)
        "randn",
        "rand",
        "randn_like",
        "rand_like",
    }
)

# Spellings of one computation that torch does not alias (its aliases come from aliases.py):
# calling any of them reimplements nothing.
GROUPS = (
    frozenset(
        {
            "matmul",
            "mm",
            "bmm",
            "linear",
            "addmm",
            "baddbmm",
            "addbmm",
            "einsum",
            "tensordot",
            "dot",
            "mv",
            "inner",
            "rmatmul",
            "addmv",
            "chain_matmul",
            "multi_dot",
        }
    ),
    frozenset(
        {"conv1d", "conv2d", "conv3d", "convolution", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}
    ),
    frozenset({"softmax", "log_softmax", "softmin"}),
    frozenset({"layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "native_layer_norm"}),
    frozenset({"scaled_dot_product_attention", "multi_head_attention_forward"}),
    frozenset({"sum", "nansum", "mean", "nanmean"}),
    frozenset({"relu", "clamp_min", "threshold", "clamp"}),  # relu(x) == x.clamp(min=0) == threshold(x, 0, 0)
    frozenset({"clamp", "clamp_min", "clamp_max", "hardtanh"}),
    frozenset({"max", "amax"}),  # x.max(dim).values == x.amax(dim)
    frozenset({"min", "amin"}),
)


def ops_of(calls: Iterable[str]) -> set[str]:
    """The ops of recorded calls (kernelkiln.task.calls), each in its normalized spelling (``__rmul__`` -> ``mul``)."""
    return {spelling(name) for name in calls}


def _ops(names: Iterable[str]) -> set[str]:
    """``names`` and the canonical ATen ops they run (``multiply`` -> ``mul``)."""
    table = canonical_ops()
    return {op for name in names for op in table.get(name, frozenset()) | {name}}


def _aliases(ops: set[str]) -> set[str]:
    """Every spelling that runs one of ``ops``, and the ops themselves."""
    return ops | {name for name, runs in canonical_ops().items() if runs & ops}


def forbidden_ops(recorded: Iterable[str], forbidden: Iterable[str] | None, allowed: Iterable[str]) -> frozenset[str]:
    """The candidate's forbidden ops: explicit list if given, else the reference's compute ops.

    Closed under torch's aliases and the GROUPS: every spelling that runs the same ATen op as
    a forbidden name, or one of its group, is forbidden too. ``allowed`` names and their aliases
    are taken off first, so their groups stay allowed; plumbing is never added.
    """
    if forbidden is not None:
        base = {spelling(n) for n in forbidden}
    else:
        base = {spelling(n) for n in recorded} - PLUMBING
    spared = _aliases(_ops(spelling(a) for a in allowed))
    ops = _ops(base - spared)
    ops |= {op for group in GROUPS if group & ops for op in group}
    free = PLUMBING - base  # plumbing stays allowed unless the task's own list names it
    return frozenset((base | _aliases(ops - free)) - free - spared)


def record(module: torch.nn.Module, inputs: list[Any]) -> set[str]:
    """Run ``module`` once and return the ops it called."""
    return ops_of(record_calls(module, inputs))


def reference_models(task: Task, seed: int) -> tuple[dict[int, Any], set[str]]:
    """The parent's reference model per workload, each run once, and the ops the first one calls.

    A reference that cannot be built or run at a workload's sizes is the task's fault: one line.
    """
    models: dict[int, Any] = {}
    recorded: set[str] = set()
    for i, workload in enumerate(task.workloads):
        try:
            models[i] = task.make_model(workload, seed)
            with task.bound(workload), torch.no_grad():  # the lock: other sessions' threads share torch's RNG
                inputs = task.make_inputs(workload, 0)
                if i == 0:
                    recorded = record(models[i], inputs)
                else:
                    models[i](*inputs)
        except UserError:
            raise
        except Exception as exc:
            raise task.reference_failure(workload, exc) from None
    return models, recorded
