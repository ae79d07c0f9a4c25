"""``load_model``: the kernels ``kiln model`` saved in ``OUT/model/``, running in a freshly built model.

The model is captured again at each saved shape's example inputs, the same regions are
found by structure and the kernels spliced (a ``SplicedModel``, compiled with the
torch.compile configuration the run found fastest when it was); a model ``kiln model``
captured through dynamo is compiled with ``backend.Backend`` instead. Either way it is
checked against eager once per shape before it is handed back.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch

from kernelkiln import native
from kernelkiln.errors import UserError, described
from kernelkiln.model import compilers, verify
from kernelkiln.model.artifact import Manifest, saved_kernels, served
from kernelkiln.model.backend import saved_backend
from kernelkiln.model.capture import capture
from kernelkiln.model.regions import partition
from kernelkiln.model.splice import Kernel, SpliceError, splice
from kernelkiln.model.spliced import SplicedModel
from kernelkiln.model.taskfile import by_structure


def _always(example: tuple[Any, ...]) -> Callable[[], tuple[Any, ...]]:
    return lambda: example


def load_model(
    out: str | Path,
    model: torch.nn.Module,
    *,
    rebuild: bool = False,
    splice_model_kernels: bool = False,
) -> torch.nn.Module:
    """``model`` running the kernels ``kiln model`` saved in ``out/model/``, checked against eager once.

    ``model`` is built as it was for the run (its weights may differ: the kernels read the
    model's own). ``rebuild``: on a machine other than the one the kernels were built for,
    build them from source here (a C compiler is needed) instead of refusing.
    ``splice_model_kernels``: run kernels an LLM wrote (in this process, outside any sandbox).
    """
    folder, manifest, kernels = saved_kernels(out, splice_model_kernels)
    if manifest.capture == "dynamo":
        return _compiled(folder, manifest, kernels, model, rebuild)
    shapes = []
    for saved in manifest.shapes:
        example = _example(folder / saved.example)
        captured = capture(model, example)
        groups = by_structure(partition(captured).regions)
        for r in saved.regions:
            found = len(groups.get(r.structure, []))
            if found != r.places:
                at = f" at {saved.label}" if saved.label else ""
                raise UserError(
                    f"{type(model).__name__} is not the model {folder} was made for: the region kernels/{r.kernel}.py "
                    f"serves occurs {found} time(s) in it{at}, {r.places} in {manifest.model}"
                )
        shapes.append((captured, {r.kernel: groups[r.structure] for r in saved.regions}, example))
    graphs = []
    try:
        with native.prebuilt(served(folder, manifest, rebuild)):
            for captured, regions, _ in shapes:
                graphs.append(splice(captured, regions, {k: kernels[k] for k in regions}))
    except (native.BuildError, SpliceError) as exc:
        raise UserError(f"{folder}'s kernels cannot be loaded here: {described(exc)[:300]}") from None
    spliced: torch.nn.Module = SplicedModel(model, [(c, g) for (c, _, _), g in zip(shapes, graphs, strict=True)])
    if manifest.form != "eager":  # the form kiln model measured fastest: compiled, the kernels' ops left whole
        spliced = compilers.wrap(spliced, manifest.form, spliced=True)
    _check(folder, model, spliced, [example for _, _, example in shapes])
    return spliced


def _example(path: Path) -> tuple[Any, ...]:
    try:
        return tuple(torch.load(path, weights_only=True))
    except Exception as exc:
        raise UserError(f"{path} cannot be read ({described(exc)[:200]})") from None


def _check(folder: Path, model: torch.nn.Module, loaded: torch.nn.Module, examples: list[tuple[Any, ...]]) -> None:
    for example in examples:
        result = verify.check(model, loaded, _always(example), trials=1)
        if result.failure:
            raise UserError(f"{folder}'s kernels disagree with eager on the saved example inputs: {result.failure}")


def _compiled(
    folder: Path, manifest: Manifest, kernels: dict[str, Kernel], model: torch.nn.Module, rebuild: bool
) -> torch.nn.Module:
    """A model captured through dynamo: compiled with the backend, one graph per shape."""
    under = saved_backend(folder, manifest, kernels, rebuild=rebuild)
    compiled = cast(torch.nn.Module, torch.compile(model, backend=under, dynamic=False))
    _check(folder, model, compiled, [_example(folder / s.example) for s in manifest.shapes])
    return compiled
