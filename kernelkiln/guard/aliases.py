"""Names of torch ops: one normalized spelling per function, and the ATen op behind each.

torch has no public table of its aliases, but its dispatcher is one: CompositeImplicitAutograd
aliases (torch.multiply, torch.clip, torch.true_divide, torch.special.expit, ...) decompose to
their canonical ATen op (aten.mul, aten.clamp, aten.div, aten.sigmoid) before a dispatch mode
sees them. ``canonical_ops`` calls each overridable function of torch, torch.Tensor,
torch.nn.functional, torch.special and torch.linalg once as f(x) and once as f(x, y) on tiny
tensors under such a mode, once per process, when a guard session first asks.
"""

from __future__ import annotations

import functools
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch.overrides import get_overridable_functions
from torch.utils._python_dispatch import TorchDispatchMode

from kernelkiln.task.calls import call_name
from kernelkiln.task.model import BINDING

_REVERSED = frozenset({"matmul", "add", "sub", "mul", "truediv", "pow"})

# ATen ops that allocate, copy, convert or validate: a call that runs one of these and one other
# op is an alias of that op. Views are not among them: a function that views its inputs before
# computing (diff, kron, linear) computes something else than the op it ends in.
_INCIDENTAL = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "new_zeros",
        "new_ones",
        "new_full",
        "scalar_tensor",
        "fill",
        "zero",
        "clone",
        "copy",
        "to_copy",
        "detach",
        "alias",
        "lift_fresh",
        "local_scalar_dense",
        "linalg_check_errors",
    }
)
# Not called: iterative solvers (seconds each), symbolic-shape helpers (they import sympy), and
# functions that reach devices, shared memory, hooks, autograd or serialization.
_SKIP = frozenset(
    {
        "lobpcg",
        "pca_lowrank",
        "svd_lowrank",
        "unravel_index",
        "dim_order",
        "cuda",
        "cpu",
        "ipu",
        "xpu",
        "mtia",
        "to",
        "type",
        "pin_memory",
        "is_pinned",
        "is_shared",
        "share_memory_",
        "record_stream",
        "backward",
        "register_hook",
        "register_post_accumulate_grad_hook",
        "retain_grad",
        "module_load",
        "numpy",
        "tolist",
        "storage",
        "untyped_storage",
        "storage_type",
        "__array__",
        "__array_wrap__",
        "__deepcopy__",
        "__dlpack__",
        "__dlpack_device__",
        "__format__",
        "__reduce_ex__",
        "__repr__",
        "__setstate__",
    }
)
_NAMESPACES = (torch, torch.Tensor, torch.nn.functional, torch.functional, torch.special, torch.linalg)


def spelling(name: str) -> str:
    """A normalized name: in-place, dunder and reversed dunder (``__rmul__``) spellings fold onto the op's name."""
    dunder = name.startswith("__") and name.endswith("__")
    name = name.strip("_")
    if dunder and name.startswith("r") and name[1:] in _REVERSED:
        name = name[1:]
    return name.rstrip("_").lower() or "?"


def op_name(func: object) -> str:
    """The normalized name of a torch function, ATen op or property (named by its descriptor)."""
    return spelling(call_name(func))


class _AtenRecorder(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch leaves the mode untyped
    """Collects the normalized names of the ATen ops dispatched while active."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # torch leaves the mode untyped
        self.ops: set[str] = set()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # else torch wraps the hook in torch._dynamo.disable: 2 s to import, for nothing here

    def __torch_dispatch__(
        self, func: Any, types: object, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        self.ops.add(op_name(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def _probe(func: Callable[..., Any]) -> set[str]:
    """The compute ops ``func`` runs as f(x) and as f(x, y), from the calls that run exactly one."""
    found: set[str] = set()
    for arity in (1, 2):
        # Fixed (a probe's outcome must not vary), positive and symmetric positive definite: few raises.
        args = [torch.tensor([[2.0, 0.5], [0.5, 1.0]]), torch.tensor([[1.5, 0.25], [0.75, 1.25]])][:arity]
        recorder = _AtenRecorder()
        try:
            with recorder:
                func(*args)
        except Exception:
            continue
        compute = recorder.ops - _INCIDENTAL
        if len(compute) == 1:
            found |= compute
    return found


def _functions() -> Iterator[tuple[Callable[..., Any], set[str]]]:
    """Each overridable function to probe, with its spellings: its own name and those it is exposed under."""
    overridable = get_overridable_functions()
    for namespace in _NAMESPACES:
        scopes = [vars(c) for c in torch.Tensor.__mro__] if namespace is torch.Tensor else [vars(namespace)]
        exposed: dict[int, set[str]] = {}
        for scope in scopes:
            for attr, value in scope.items():
                exposed.setdefault(id(value), set()).add(attr)
        for func in overridable.get(namespace, []):
            name = getattr(func, "__name__", "")
            if (
                isinstance(func, type)
                or name in _SKIP
                or name.startswith("sym_")
                or (name.startswith("_") and not name.startswith("__"))
            ):
                continue
            yield func, {op_name(func)} | {spelling(a) for a in exposed.get(id(func), ())}


@functools.cache
def _derive() -> Mapping[str, frozenset[str]]:
    table: dict[str, set[str]] = {}
    # Probes of random_, dropout, ... draw from torch's global RNG: fork_rng puts it back.
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for func, names in _functions():
            ops = _probe(func)
            if ops:
                for name in names:
                    table.setdefault(name, set()).update(ops)
    return types.MappingProxyType({name: frozenset(ops) for name, ops in table.items()})


def canonical_ops() -> Mapping[str, frozenset[str]]:
    """Spelling -> the canonical ATen ops it runs (``multiply`` -> {mul}), derived once per process."""
    # BINDING guards torch's global RNG, which the derivation borrows, and makes it happen once.
    with BINDING:
        return _derive()
