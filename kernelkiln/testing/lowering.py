"""Small KernelBench-format tasks for the lowering's tests, and a check that a generated candidate matches.

``write_task`` writes a task file from a ``forward`` body (or a whole ``Model``) and its
size variables; ``run_candidate`` executes a candidate's source in-process, as the
guard's worker would load it, and ``mismatch`` compares its outputs with the
reference's on fresh inputs.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import torch

from kernelkiln.task import load_task
from kernelkiln.task.model import Task, Workload

ATOL = RTOL = 1e-4  # float32's default tolerance, compared in float64


def task_source(
    forward: str,
    sizes: dict[str, Any],
    inputs: str,
    init: str = "[]",
    init_body: str = "",
    args: str = "",
    signature: str = "x",
    kiln: dict[str, Any] | None = None,
    model: str | None = None,
) -> str:
    """A task file: ``Model`` (``init_body`` in ``__init__(self, args)``; ``forward(self, signature)`` returns
    the expression ``forward``, or runs it as its body when it has several lines); ``model`` replaces the class."""
    if model is None:
        body = forward if "\n" in forward.strip() or forward.lstrip().startswith("return") else f"return {forward}"
        model = (
            "class Model(nn.Module):\n"
            f"    def __init__(self{', ' + args if args else ''}):\n"
            "        super().__init__()\n"
            + textwrap.indent(textwrap.dedent(init_body).strip() or "pass", " " * 8)
            + "\n\n"
            f"    def forward(self, {signature}):\n" + textwrap.indent(textwrap.dedent(body).strip(), " " * 8) + "\n"
        )
    lines = ["import torch", "import torch.nn as nn", "import torch.nn.functional as F", "", textwrap.dedent(model), ""]
    lines += [f"{name} = {value!r}" for name, value in sizes.items()]
    if kiln is not None:
        lines.append(f"KILN = {kiln!r}")
    lines += ["", "def get_inputs():", f"    return {inputs}", "", "def get_init_inputs():", f"    return {init}", ""]
    return "\n".join(lines)


def write_task(
    directory: Path,
    name: str,
    forward: str,
    sizes: dict[str, Any],
    inputs: str,
    overrides: dict[str, Any] | None = None,
    **options: Any,
) -> Task:
    """Write ``name``.py into ``directory`` and load it."""
    path = Path(directory) / f"{name}.py"
    path.write_text(task_source(forward, sizes, inputs, **options))
    return load_task(path, overrides)


def layer_task(directory: Path, module: str, shape: str, forward: str = "self.c(x)") -> Task:
    """A task whose model is one layer, ``self.c = MODULE``, run as ``forward`` on ``torch.randn(*SHAPE)``."""
    return write_task(directory, "task", forward, {}, f"[torch.randn{shape}]", init_body=f"self.c = {module}")


def with_knobs(source: str, **values: Any) -> str:
    """The candidate with each named knob's module-level value set (``with_knobs(src, CONV="direct")``)."""
    for name, value in values.items():
        source = re.sub(rf"^{name} = .*$", f"{name} = {value!r}", source, count=1, flags=re.M)
    return source


def run_candidate(source: str) -> dict[str, Any]:
    """The candidate's module namespace (it compiles its C source as it is imported)."""
    namespace: dict[str, Any] = {"__name__": "kiln_candidate"}
    exec(compile(source, "candidate.py", "exec"), namespace)
    return namespace


def _outputs(value: Any) -> list[torch.Tensor]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _copies(inputs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def mismatch(
    task: Task,
    source: str,
    workload: Workload | None = None,
    seeds: tuple[int, ...] = (1, 2),
    namespace: dict[str, Any] | None = None,
) -> str | None:
    """Why the candidate's outputs differ from the reference's at ``workload`` (all when None); None when they match.

    Inputs are drawn with seeds other than the one the lowering traced at (0); floating
    outputs must match within ATOL/RTOL in float64, integer and bool outputs exactly, and
    shapes and dtypes exactly.
    """
    namespace = namespace or run_candidate(source)
    for w in [workload] if workload is not None else task.workloads:
        reference, candidate = task.make_model(w, 0), task.make_model(w, 0, namespace["ModelNew"])
        for seed in seeds:
            inputs = task.make_inputs(w, seed)
            drawing = torch.get_rng_state()  # a forward that draws at random: both from the same state, as the guard
            with torch.no_grad():
                want = _outputs(reference(*_copies(inputs)))
                torch.set_rng_state(drawing)
                got = _outputs(candidate(*_copies(inputs)))
            if len(want) != len(got):
                return f"{w.name}: {len(got)} outputs, the reference gives {len(want)}"
            for k, (a, b) in enumerate(zip(want, got, strict=True)):
                where = f"{w.name} seed {seed} output {k}"
                if not isinstance(b, torch.Tensor):
                    return f"{where}: a {type(b).__name__}, not a tensor"
                if a.shape != b.shape or a.dtype != b.dtype:
                    return f"{where}: {tuple(b.shape)} {b.dtype}, the reference gives {tuple(a.shape)} {a.dtype}"
                if a.is_floating_point():
                    if not torch.allclose(b.double(), a.double(), atol=ATOL, rtol=RTOL, equal_nan=True):
                        worst = (b.double() - a.double()).abs().nan_to_num(float("inf")).max().item()
                        return f"{where}: differs by up to {worst:.3g}"
                elif not torch.equal(a, b):
                    return f"{where}: {int((a != b).sum())} of {a.numel()} elements differ"
    return None
