"""Which torch ops a computation calls, recorded under a torch function mode.

The reference's compute ops become the candidate's forbidden ops (a task may widen or
narrow the list); plumbing (allocation, shape queries, views) is always allowed.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch.overrides import TorchFunctionMode

# Ops that move or describe data without computing the task's result.
PLUMBING = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
    "new_empty", "new_zeros", "new_ones", "new_full", "size", "dim", "numel", "shape", "stride", "storage_offset",
    "contiguous", "is_contiguous", "view", "view_as", "reshape", "reshape_as", "flatten", "unsqueeze", "squeeze",
    "expand", "expand_as", "data_ptr", "dtype", "device", "to", "cpu", "float", "double", "half", "bfloat16",
    "getitem", "setitem", "len", "repr", "format", "bool", "int", "index", "detach", "requires_grad", "item",
    "tolist", "copy", "fill", "zero", "get_device", "element_size", "is_floating_point", "is_complex", "layout",
    "is_cuda", "grad", "grad_fn", "ndim", "nbytes", "itemsize", "untyped_storage", "storage", "type",
    "names", "is_sparse", "is_quantized", "is_meta", "is_nested", "data", "output_nr", "version", "get",
    "iter", "hash", "eq_", "clone", "numpy", "T", "mT", "t", "transpose", "permute", "unbind", "split", "chunk",
    "narrow", "select", "as_strided", "is_leaf", "retains_grad", "is_mkldnn", "nelement",
})

# Spellings of one computation: calling any of them reimplements nothing.
GROUPS = (
    frozenset({"matmul", "mm", "bmm", "linear", "addmm", "baddbmm", "addbmm", "einsum", "tensordot",
               "dot", "mv", "inner", "rmatmul", "addmv", "chain_matmul", "multi_dot"}),
    frozenset({"conv1d", "conv2d", "conv3d", "convolution", "conv_transpose1d", "conv_transpose2d",
               "conv_transpose3d"}),
    frozenset({"softmax", "log_softmax", "softmin"}),
    frozenset({"layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm", "native_layer_norm"}),
    frozenset({"scaled_dot_product_attention", "multi_head_attention_forward"}),
    frozenset({"sum", "nansum", "mean", "nanmean"}),
)


def op_name(func: object) -> str:
    """A normalized short name: in-place and dunder spellings fold onto the op's name."""
    name = getattr(func, "__name__", None) or repr(func)
    if name == "__get__":  # a property such as Tensor.shape or Tensor.T: name it by its descriptor
        name = getattr(getattr(func, "__self__", None), "__name__", None) or name
    name = name.strip("_")
    if name.startswith("r") and name[1:] in {"matmul", "add", "sub", "mul", "truediv", "pow"}:
        name = name[1:]
    return name.rstrip("_").lower() or "?"


class OpRecorder(TorchFunctionMode):
    """Collects the normalized names of every torch function called while active."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.add(op_name(func))
        return func(*args, **(kwargs or {}))


def expand(names: Iterable[str]) -> set[str]:
    """Names plus every other spelling of the same computation."""
    out = {n.lower().strip("_") for n in names}
    for group in GROUPS:
        if out & group:
            out |= group
    return out


def forbidden_ops(recorded: Iterable[str], forbidden: Iterable[str] | None, allowed: Iterable[str]) -> frozenset[str]:
    """The candidate's forbidden ops: explicit list if given, else the reference's compute ops."""
    base = set(forbidden) if forbidden is not None else set(recorded) - PLUMBING
    return frozenset(expand(base) - {a.lower() for a in allowed})


def record(module: torch.nn.Module, inputs: list) -> set[str]:
    """Run ``module`` once and return the ops it called."""
    recorder = OpRecorder()
    with torch.no_grad(), recorder:
        module(*inputs)
    return recorder.names
