"""The ``torch.compile`` configurations a spliced model is timed against, each as a user would run it.

``default``: ``torch.compile(model)``. ``strongest``: what a performance-minded user runs on a
CPU for inference: Inductor with frozen weights (``freezing``: parameters folded as constants,
weights prepacked, post-ops fused into oneDNN's kernels), ``max_autotune`` (its C++ GEMM
template chosen per shape against ATen's by timing both) and ``cpp_wrapper`` (the graph's glue
in C++, no per-kernel Python). Freezing applies to inference only: each arm runs under
``torch.no_grad()``, as the end-to-end timing does. A configuration that fails to compile or
run is reported with its error, never timed; the spliced model is compared with the fastest
configuration that ran.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch

from kernelkiln.errors import described

COMPILERS: dict[str, dict[str, Any]] = {
    "default": {},
    "strongest": {"freezing": True, "max_autotune": True, "cpp_wrapper": True},
}


# A graph calling kernelkiln's custom ops is compiled without ``cpp_wrapper``: torch 2.13's C++ wrapper hands
# a custom op's tensor-list arguments to Python as handles the callee takes ownership of while the wrapper
# still frees them, and the process crashes (segmentation fault, measured on the spliced GPT-2).
WITHOUT_IN_SPLICED = ("cpp_wrapper",)


@dataclass(frozen=True)
class Compiled:
    """One configuration's compiled model ready to call at the example, or why it is not."""

    name: str
    run: Callable[[], Any] | None
    error: str = ""
    model: Callable[..., Any] | None = None  # the compiled model, to call at other inputs of the example's shape


def names(text: str) -> tuple[str, ...]:
    """``default,strongest`` as a tuple of known configuration names; ValueError naming the unknown one."""
    wanted = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in wanted if n not in COMPILERS]
    if unknown:
        raise ValueError(f"unknown torch.compile configuration {unknown[0]!r}: choose from {', '.join(COMPILERS)}")
    return wanted


def compile_at(model: torch.nn.Module, example: tuple[Any, ...], name: str, *, spliced: bool = False) -> Compiled:
    """``model`` compiled with configuration ``name`` (one graph a shape: ``dynamic=False``) and run once at
    ``example`` (where compilation happens)."""
    try:
        compiled = wrap(model, name, spliced=spliced)
        with torch.no_grad():
            compiled(*example)
    except Exception as exc:  # a baseline that cannot compile is reported, never fatal
        return Compiled(name, None, described(exc)[:300])
    return Compiled(name, lambda: compiled(*example), model=compiled)


def wrap(model: torch.nn.Module, name: str, *, spliced: bool = False) -> torch.nn.Module:
    """``model`` under ``torch.compile`` with configuration ``name`` (compiled at its first call, one graph a shape);
    ``spliced``: a model calling kernelkiln's custom ops (``WITHOUT_IN_SPLICED`` left out)."""
    options = {k: v for k, v in COMPILERS[name].items() if not (spliced and k in WITHOUT_IN_SPLICED)}
    compiled = torch.compile(model, options=options, dynamic=False) if options else torch.compile(model, dynamic=False)
    if options.get("freezing"):
        return Frozen(cast(torch.nn.Module, compiled))
    return cast(torch.nn.Module, compiled)


class Frozen(torch.nn.Module):
    """A compiled model whose compilations run with ``torch._inductor.config.freezing`` set.

    ``torch.compile(model, options={"freezing": True})`` freezes nothing (torch 2.13, measured:
    no parameter became a constant): the option reaches Inductor, but dynamo, which decides
    whether the module's parameters enter the graph as parameters (what freezing folds), reads
    the global setting. So each call at inputs not seen before (where dynamo compiles) runs
    with it set; later calls pay nothing for it. Frozen weights are constants of the compiled
    code: a weight changed afterwards is not seen (as with any frozen Inductor model).
    """

    def __init__(self, compiled: torch.nn.Module):
        super().__init__()
        self.compiled = compiled
        self._seen: set[tuple[Any, ...]] = set()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        key = (
            torch.is_grad_enabled(),
            *((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else _plain(a) for a in args),
            *sorted(kwargs),
        )
        if key in self._seen:
            return self.compiled(*args, **kwargs)
        import torch._inductor.config as inductor_config

        with inductor_config.patch(freezing=True):
            out = self.compiled(*args, **kwargs)
        self._seen.add(key)
        return out


def _plain(value: Any) -> Any:
    """A non-tensor argument as part of a hashable key (a container by its type: what it holds is not read)."""
    return value if isinstance(value, (int, float, bool, str, type(None))) else type(value).__name__
