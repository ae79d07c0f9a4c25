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
from typing import Any

import torch

from kernelkiln.errors import described

COMPILERS: dict[str, dict[str, Any]] = {
    "default": {},
    "strongest": {"freezing": True, "max_autotune": True, "cpp_wrapper": True},
}


@dataclass(frozen=True)
class Compiled:
    """One configuration's compiled model ready to call at the example, or why it is not."""

    name: str
    run: Callable[[], Any] | None
    error: str = ""


def names(text: str) -> tuple[str, ...]:
    """``default,strongest`` as a tuple of known configuration names; ValueError naming the unknown one."""
    wanted = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in wanted if n not in COMPILERS]
    if unknown:
        raise ValueError(f"unknown torch.compile configuration {unknown[0]!r}: choose from {', '.join(COMPILERS)}")
    return wanted


def compile_at(model: torch.nn.Module, example: tuple[Any, ...], name: str) -> Compiled:
    """``model`` compiled with configuration ``name`` and run once at ``example`` (where compilation happens)."""
    options = COMPILERS[name]
    try:
        compiled = torch.compile(model, options=options) if options else torch.compile(model)
        with torch.no_grad():
            compiled(*example)
    except Exception as exc:  # a baseline that cannot compile is reported, never fatal
        return Compiled(name, None, described(exc)[:300])
    return Compiled(name, lambda: compiled(*example))
