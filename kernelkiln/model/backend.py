"""``torch.compile(model, backend=kernelkiln.backend(OUT))``: the saved kernels inside a compiled graph.

Dynamo hands the backend each graph it captures; AOTAutograd lowers it to ATen with the same
decompositions ``kiln model`` captured with, so a region there renders to the same task as
in the run. Every region whose structure ``OUT/model/`` holds a kernel for is replaced by
that kernel's custom op, and the graph then runs as it is, calling the kernels directly
(``inner="eager"``, the default) or goes on to Inductor (``inner="inductor"``, which fuses
what is left around the ops but calls each through the dispatcher: on the tiny test model
that was twice as slow as ``eager``, measured). A graph with none of
the saved regions (another model, another shape) is compiled untouched. ``.found`` says, per
graph compiled, how many regions were replaced. Inference only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from kernelkiln import native
from kernelkiln.errors import UserError
from kernelkiln.model.artifact import Manifest, saved_kernels, served
from kernelkiln.model.capture import Captured, decompositions
from kernelkiln.model.dynamo import kind, placeholders
from kernelkiln.model.regions import Region, partition
from kernelkiln.model.splice import Kernel, direct, splice
from kernelkiln.model.taskfile import structure_key


class Backend:
    """A ``torch.compile`` backend splicing ``kernels`` where a graph holds their regions (see the module docstring).

    ``wanted``: a region's ``structure_key`` -> the kernel serving it; ``served``: saved libraries
    to open instead of building (``artifact.served``); ``where``: what to name in notes.
    """

    def __init__(
        self,
        kernels: dict[str, Kernel],
        wanted: dict[str, str],
        *,
        inner: Literal["inductor", "eager"] = "eager",
        served: Mapping[native.BuildRequest, str] | None = None,
        where: str = "the kernels",
    ):
        if inner not in ("inductor", "eager"):
            raise UserError(f"backend: inner must be 'inductor' or 'eager', not {inner!r}")
        self.kernels = kernels
        self.wanted = wanted
        self.inner = inner
        self.served = dict(served or {})
        self.where = where
        self.found: list[int] = []  # per graph compiled: the regions spliced in it
        self._said: set[str] = set()

    def __call__(self, gm: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        from torch._dynamo.backends.common import aot_autograd

        # Dynamo's graph takes the module's parameters and buffers as arguments (named for them);
        # AOTAutograd's keeps that order, so each ATen placeholder's kind is known.
        kinds = [kind(n.name, x) for n, x in zip(placeholders(gm), example_inputs, strict=True)]

        def forward(aten: fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
            return self._compile(aten, inputs, kinds)

        compiled: Callable[..., Any] = aot_autograd(fw_compiler=forward, decompositions=decompositions())(
            gm, example_inputs
        )
        return compiled

    def _compile(self, aten: fx.GraphModule, inputs: list[Any], kinds: list[str]) -> Callable[..., Any]:
        names = [n.name for n in placeholders(aten)]
        regions: dict[str, list[Region]] = {}
        if any(not isinstance(x, torch.Tensor) or _symbolic(x) for x in inputs):
            self._say(
                "a graph with symbolic sizes (torch.compile made it dynamic at a second shape) is compiled "
                "without kernels: torch.compile(..., dynamic=False) compiles one graph per shape"
            )
            self.found.append(0)
            return self._finish(aten, inputs)
        if len(names) == len(kinds):
            captured = Captured(aten, {}, dict(zip(names, kinds, strict=True)), tuple(inputs))
            for region in partition(captured).regions:
                key = self.wanted.get(structure_key(region))
                if key is not None:
                    regions.setdefault(key, []).append(region)
        self.found.append(sum(len(r) for r in regions.values()))
        if not regions:
            self._say(f"none of the regions {self.where} serve is in this graph: compiled without them")
            return self._finish(aten, inputs)
        # AOTAutograd calls this under its fake mode: the constants splice folds (a causal mask) must be real.
        with unset_fake_temporarily(), native.prebuilt(self.served):
            spliced = splice(captured, regions, {k: self.kernels[k] for k in regions})
        return self._finish(spliced, inputs)

    def _say(self, line: str) -> None:
        if line not in self._said:
            self._said.add(line)
            print(f"kiln: {line}", file=sys.stderr)

    def _finish(self, gm: fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
        if self.inner == "eager":
            return direct(gm)
        from torch._inductor.compile_fx import compile_fx_inner

        return compile_fx_inner(gm, inputs)


def _symbolic(x: torch.Tensor) -> bool:
    return any(not isinstance(s, int) for s in x.shape)


def backend(
    out: str | Path,
    *,
    inner: Literal["inductor", "eager"] = "eager",
    rebuild: bool = False,
    splice_model_kernels: bool = False,
) -> Backend:
    """A ``torch.compile`` backend running the kernels ``kiln model`` saved in ``out/model/``.

    ``inner``: what runs the rest of each graph ("eager": the graph as is; "inductor": compiled);
    ``rebuild`` and ``splice_model_kernels``: as for ``load_model``.
    """
    folder, manifest, kernels = saved_kernels(out, splice_model_kernels)
    return saved_backend(folder, manifest, kernels, inner=inner, rebuild=rebuild)


def saved_backend(
    folder: Path,
    manifest: Manifest,
    kernels: dict[str, Kernel],
    *,
    inner: Literal["inductor", "eager"] = "eager",
    rebuild: bool = False,
) -> Backend:
    """The backend for a saved folder already read (``artifact.saved_kernels``); refused here, in one line, on
    another CPU without ``rebuild``."""
    wanted = {r.structure: r.kernel for s in manifest.shapes for r in s.regions}
    found = served(folder, manifest, rebuild)
    return Backend(kernels, wanted, inner=inner, served=found, where=f"the kernels saved in {folder}")
