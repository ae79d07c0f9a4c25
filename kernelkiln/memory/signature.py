"""What memory matches a task on: an exact key for reuse, and features for the nearest stored tasks.

The *exact* key is a digest of everything that decides a candidate's figures: the seed
candidate's code (a generated starting candidate is a function of the traced computation, its shapes and
dtypes and the code generator; a hand-written one is not, so the reference's source with its
size overrides joins the key then), the machine kind, the compiler and the guard's threads.
The code is digested as its syntax tree without the module docstring: a generated starting candidate's
docstring names the task it was made for (``kiln model`` numbers a model's regions by their
share, so the same layer is ``region_03`` in one model and ``region_05`` in a deeper one),
and neither it nor comments or layout change a figure. Nor do the statistics of drawn values
(``torch.randn(shape) * 0.0078125 + 0.0``, ``torch.rand(shape) < 0.5``, outside ``forward``):
they are the data a task is checked on, not its computation. GPT-2 initialises its residual projections with a
spread that shrinks with depth, so the same layer draws its weights at 2^-7 in a 2-layer model
and 2^-8 in a 12-layer one; the key sees both as one. A reused best is judged again by the
guard on the new task's own draws before it counts, so a statistic that did matter would show.
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


_DRAWS = ("randn", "rand")
_DRAWN = ast.Name("drawn")  # what a drawn value's statistic reads as in the key


def _is_draw(node: ast.expr) -> bool:
    """``torch.randn(...)`` / ``torch.rand(...)``, possibly scaled by constants already elided."""
    if isinstance(node, ast.BinOp):
        return _is_draw(node.left)
    func = node.func if isinstance(node, ast.Call) else None
    return isinstance(func, ast.Attribute) and func.attr in _DRAWS and isinstance(func.value, ast.Name)


def _statistic(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant | ast.Name) and not isinstance(getattr(node, "value", None), str)


class _Undrawn(ast.NodeTransformer):
    """Replaces the constants that scale, shift or threshold a random draw with one name, outside ``forward``
    (where a draw is the computation's own, a dropout's mask)."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return node if node.name == "forward" else self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Mult | ast.Add | ast.Sub) and _is_draw(node.left) and _statistic(node.right):
            node.right = _DRAWN
            node.op = ast.Add() if isinstance(node.op, ast.Sub) else node.op  # a shift's sign is a statistic too
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if _is_draw(node.left) and len(node.comparators) == 1 and _statistic(node.comparators[0]):
            node.comparators = [_DRAWN]
        return node


def exact_code(code: str) -> str:
    """``code`` as the exact key sees it: its syntax tree, unparsed, less the module docstring and with the
    statistics of random draws elided."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        tree.body = tree.body[1:]
    return ast.unparse(_Undrawn().visit(tree))


def signature(task: Task, task_id: str, start_code: str, *, generated: bool, platform: str, machine: str) -> Signature:
    """``task``'s signature when its agents start from ``seed_code`` on ``machine`` (``platforms.machine_kind``)."""
    try:
        knobs = tuple(k.name for k in K.read_knobs(start_code)) if start_code else ()
    except K.KnobError:
        knobs = ()
    reference = None if generated else [task.source, sorted(task.overrides.items())]
    exact = _digest(exact_code(start_code), reference, platform, machine, _compiler(platform))
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
