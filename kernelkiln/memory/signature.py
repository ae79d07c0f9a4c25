"""What memory matches a task on: an exact key for reuse, and features for the nearest stored tasks.

The *exact* key is a digest of everything that decides a candidate's figures: the seed
candidate's code (a generated seed is a function of the traced computation, its shapes and
dtypes and the code generator; a hand-written one is not, so the reference's source with its
size overrides joins the key then), the machine kind, the compiler and the guard's threads.
The code is digested as its syntax tree without the module docstring: a generated seed's
docstring names the task it was made for (``kiln model`` numbers a model's regions by their
share, so the same layer is ``region_03`` in one model and ``region_05`` in a deeper one),
and neither it nor comments or layout change a figure.
Two tasks with equal keys have the same knob space with the same figures, so a stored best
is reused as it is (MetaSchedule's database). A changed compiler, CPU or generator that
changes the generated code is not a match.

The other fields place a task among its siblings for *transfer* (``distance``): the same
platform and machine are required; then the op family, the knob names the seed declares (the
search space's dimensions), and the size of the work in log2 (the inputs' elements, and the
first input's last dimension: the row a kernel walks).
"""

from __future__ import annotations

import ast
import hashlib
import json
import math

from kernelkiln.store.records import Signature
from kernelkiln.task import Task
from kernelkiln.task import knobs as K

# Weights of ``distance``'s terms: a different family counts as much as disjoint knob spaces,
# and a factor of two in the work as a tenth of either.
_FAMILY, _KNOBS, _SIZE = 1.0, 1.0, 0.1


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _compiler(platform: str) -> str:
    from kernelkiln.native.toolchain import CompilerNotFound, find_compiler  # not at import: native loads torch

    try:
        return find_compiler("cuda" if platform == "cuda" else "c").version
    except CompilerNotFound:
        return "none"


def _sizes(task: Task) -> tuple[float, float]:
    elements, inner = [], []
    for workload in task.workloads:
        tensors = [x for x in task.make_inputs(workload, 0) if hasattr(x, "numel")]
        elements.append(math.log2(max(1, sum(int(x.numel()) for x in tensors))))
        inner.append(math.log2(max(1, int(tensors[0].shape[-1]) if tensors and tensors[0].dim() else 1)))
    n = max(1, len(elements))
    return sum(elements) / n, sum(inner) / n


def _code(code: str) -> str:
    """``code`` as the exact key sees it: its syntax tree, unparsed, less the module docstring."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        tree.body = tree.body[1:]
    return ast.unparse(tree)


def signature(task: Task, task_id: str, seed_code: str, *, generated: bool, platform: str, machine: str) -> Signature:
    """``task``'s signature when its agents start from ``seed_code`` on ``machine`` (``platforms.machine_kind``)."""
    try:
        knobs = tuple(k.name for k in K.read_knobs(seed_code)) if seed_code else ()
    except K.KnobError:
        knobs = ()
    reference = None if generated else [task.source, sorted(task.overrides.items())]
    exact = _digest(_code(seed_code), reference, platform, machine, _compiler(platform))
    elements, inner = _sizes(task)
    return Signature(
        exact=exact,
        task_id=task_id,
        platform=platform,
        machine=machine,
        family=task.op_family,
        knobs=list(knobs),
        elements=round(elements, 3),
        inner=round(inner, 3),
    )


def distance(a: Signature, b: Signature) -> float | None:
    """How far two tasks are for transfer; None when nothing carries (another platform or machine, no shared knob)."""
    if a.platform != b.platform or a.machine != b.machine:
        return None
    shared, either = set(a.knobs) & set(b.knobs), set(a.knobs) | set(b.knobs)
    if not shared:
        return None
    family = 0.0 if a.family == b.family else _FAMILY
    knobs = _KNOBS * (1.0 - len(shared) / len(either))
    size = _SIZE * (abs(a.elements - b.elements) + abs(a.inner - b.inner))
    return round(family + knobs + size, 4)
