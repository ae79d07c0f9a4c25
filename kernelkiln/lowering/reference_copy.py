"""The reference's own code as a generated candidate carries it: its classes for their ``__init__``.

ModelNew builds the reference's ``Model`` to get the same parameters, so the candidate
copies the task file's classes (``__init__`` and the methods it calls; ``forward`` left out),
its helpers and its sizes, in forms the gate allows.
"""

from __future__ import annotations

import ast
from itertools import pairwise

from kernelkiln.lowering.graph import Unsupported
from kernelkiln.task.model import Task
from kernelkiln.task.sizes import bound_names

_DROP = {"get_inputs", "get_init_inputs", "KILN"}
# The candidate's own imports, at its top (kernelkiln's last).
IMPORTS = ("import torch", "import torch.nn as nn", "from kernelkiln import native")


def reference_code(task: Task) -> tuple[list[str], str]:
    """The task file's imports the candidate's own ``IMPORTS`` lack, and its Model (and helpers) for their
    ``__init__`` and the methods it calls: every other method, forward included, is left out.

    The candidate must not call the reference's ops (the gate refuses that); it needs
    the classes only to create the same parameters the same way. Each import appears once
    in the candidate, and each ``--set`` size once, at the value set.
    """
    tree = ast.parse(task.source)
    numpy = _numpy_aliases(tree)
    if numpy:  # the gate refuses numpy in a candidate: its scalar math, spelled with math's, is all a Model may use
        tree = ast.fix_missing_locations(_NumpyAsMath(numpy).visit(tree))
        left = sorted(
            {ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and ast.unparse(n.value) in numpy}
            or {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in numpy}
        )
        if left:
            raise Unsupported(f"the reference's numpy ({', '.join(left)}), which a candidate may not import")
    imported = set(IMPORTS)
    imports: list[str] = ["import math"] if numpy and not _imports_math(tree) else []
    keep: list[tuple[str, bool]] = []  # (code, whether it is a class or function: blank lines around it)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _DROP:
            continue
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in _DROP for t in node.targets):
            continue
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module docstring
        if isinstance(node, ast.Import) and numpy and all(alias.name == "numpy" for alias in node.names):
            continue
        if isinstance(node, ast.Import) and _abc_only(node, tree):  # the gate allows collections.abc alone
            node = ast.Import([ast.alias("collections.abc")])
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            fresh = _fresh_imports(node, imported)
            if fresh is not None:
                # a node ast.parse made always has its source segment
                segment = ast.get_source_segment(task.source, node) if fresh is node else None
                imports.append(segment if segment is not None else ast.unparse(fresh))
            continue
        if isinstance(node, ast.ClassDef):
            needed = _construction_methods(node)
            body = [
                _NoLambdaAttributes().visit(n) if isinstance(n, ast.FunctionDef) else n
                for n in node.body
                if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) or n.name in needed
            ]
            node = ast.ClassDef(  # type: ignore[call-arg]  # type_params: Python 3.12's field, kept where present
                node.name,
                node.bases,
                node.keywords,
                body or [ast.Pass()],
                node.decorator_list,
                type_params=getattr(node, "type_params", []),
            )
            keep.append((ast.unparse(ast.fix_missing_locations(node)), True))
            continue
        # rewritten (numpy as math): the tree, not the task's text, says what it is
        code = (None if numpy else ast.get_source_segment(task.source, node, padded=False)) or ast.unparse(node)
        compound = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        # --set values, re-assigned where the task's own module re-assigns them (task.sizes.with_sets), so
        # derived sizes after them follow; an assignment of set names alone is replaced by the values set.
        names = bound_names(node)
        sets = [f"{n} = {task.overrides[n]!r}" for n in dict.fromkeys(names) if n in task.overrides]
        if not (names and len(sets) == len(set(names)) and _pure(node)):
            keep.append((code, compound))
        keep += [(line, False) for line in sets]
    if not any(isinstance(n, ast.ClassDef) and n.name == "Model" for n in tree.body):
        raise Unsupported("the reference's Model is not a class defined in the task file")
    out = keep[0][0] if keep else ""
    for (_, before), (code, compound) in pairwise(keep):
        out += ("\n\n\n" if before or compound else "\n") + code
    used = {n.id for n in ast.walk(ast.parse(out)) if isinstance(n, ast.Name)}
    return [i for i in imports if not _unused_elsewhere(i, used)], out


# The modules a copied reference may keep importing whether or not its kept code uses them (the gate allows them).
_OWN = frozenset({"torch", "math", "typing", "functools", "itertools", "collections", "numbers", "__future__"})


def _unused_elsewhere(statement: str, used: set[str]) -> bool:
    """Whether ``statement`` imports from outside ``_OWN`` only names the kept code never reads (48_Mamba2's
    ``from einops import rearrange``, which only its forward uses)."""
    node = ast.parse(statement).body[0]
    assert isinstance(node, (ast.Import, ast.ImportFrom))
    modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    bound = {(a.asname or a.name).split(".")[0] for a in node.names}
    return all(m.split(".")[0] not in _OWN for m in modules) and not (bound & used)


# numpy's scalar math with the same name in math (np.log2(8) in SwinV2's Model): the gate allows math, not numpy
_NUMPY_AS_MATH = frozenset({"log2", "log", "log10", "exp", "sqrt", "pi", "e", "inf", "floor", "ceil", "sin", "cos"})


def _numpy_aliases(tree: ast.Module) -> set[str]:
    """The names ``import numpy [as np]`` binds at the task file's top level."""
    return {
        alias.asname or alias.name
        for node in tree.body
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "numpy"
    }


def _abc_only(node: ast.Import, tree: ast.Module) -> bool:
    """``import collections`` where every use is ``collections.abc.X`` (Swin's ``to_2tuple``): as
    ``import collections.abc`` it binds the same name and passes the gate."""
    if [(a.name, a.asname) for a in node.names] != [("collections", None)]:
        return False
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)]
    return all(n.attr == "abc" for n in uses if n.value.id == "collections")  # type: ignore[attr-defined]


def _imports_math(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Import) and any(a.name == "math" and not a.asname for a in n.names) for n in tree.body)


class _NumpyAsMath(ast.NodeTransformer):
    """``np.log2`` as ``math.log2`` where math has the same function or constant; any other use is left (and
    refused: ``reference_code``)."""

    def __init__(self, aliases: set[str]) -> None:
        self.aliases = aliases

    def visit_Attribute(self, node: ast.Attribute) -> ast.expr:
        if isinstance(node.value, ast.Name) and node.value.id in self.aliases and node.attr in _NUMPY_AS_MATH:
            return ast.copy_location(ast.Attribute(ast.Name("math", ast.Load()), node.attr, node.ctx), node)
        return self.generic_visit(node)  # type: ignore[return-value]


class _NoLambdaAttributes(ast.NodeTransformer):
    """``self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))`` (minGPT's block) left out of a copied ``__init__``:
    it holds no parameter, and its body calls the reference's modules, which the gate refuses in a candidate."""

    def visit_Assign(self, node: ast.Assign) -> ast.stmt | None:
        attributes = all(isinstance(t, ast.Attribute) for t in node.targets)
        return None if attributes and isinstance(node.value, ast.Lambda) else node


def _construction_methods(node: ast.ClassDef) -> set[str]:
    """``__init__`` and the methods it calls through ``self`` (or the class), transitively: ResNet's
    ``_make_layer``, EfficientNet's ``_make_mbconv_block``. ``forward`` is never one of them."""
    methods = {n.name: n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    needed: set[str] = set()
    todo = ["__init__"] if "__init__" in methods else []
    while todo:
        name = todo.pop()
        needed.add(name)
        for n in ast.walk(methods[name]):
            if (
                isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name)
                and n.value.id in ("self", "cls", node.name)
                and n.attr in methods
                and n.attr not in needed
                and n.attr != "forward"
            ):
                todo.append(n.attr)
    return needed


def _fresh_imports(node: ast.Import | ast.ImportFrom, imported: set[str]) -> ast.stmt | None:
    """``node`` less the names ``imported`` already holds (the rest added to it): ``node`` itself when it
    repeats none, None when it repeats them all."""
    fresh = []
    for alias in node.names:
        one = ast.unparse(_importing(node, [alias]))
        if one not in imported:
            imported.add(one)
            fresh.append(alias)
    if len(fresh) == len(node.names):
        return node
    return _importing(node, fresh) if fresh else None


def _importing(node: ast.Import | ast.ImportFrom, names: list[ast.alias]) -> ast.stmt:
    if isinstance(node, ast.Import):
        return ast.Import(names)
    return ast.ImportFrom(node.module, names, node.level)


def _pure(node: ast.stmt) -> bool:
    """Whether leaving ``node`` out loses nothing but the values it assigns: it calls nothing."""
    return not any(
        isinstance(n, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)) for n in ast.walk(node)
    )
