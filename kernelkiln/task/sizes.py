"""Size variables: which module-level names ``--set`` may change, and the module run at given sizes.

A task's top level is re-run with each set name re-assigned right after its own top-level
assignments, so values derived from it (``bias_shape = (out_channels, 1, 1)``) follow.
"""

from __future__ import annotations

import ast
import copy
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kernelkiln.errors import UserError

_SET = "__kiln_set__"  # the namespace entry the injected assignments read; removed after the run


def _names(target: ast.expr) -> Iterator[str]:
    """The plain names an assignment target binds (``a, (b, c) = …`` binds a, b and c)."""
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from _names(elt.value if isinstance(elt, ast.Starred) else elt)


def _targets(node: ast.stmt) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return [node.target]
    return []


def bound_names(node: ast.stmt) -> list[str]:
    """Names a top-level assignment statement binds."""
    return [name for target in _targets(node) for name in _names(target)]


def is_size_value(value: Any) -> bool:
    """An int, float, bool or str, or a non-empty tuple/list of ints and floats."""
    if isinstance(value, (int, float, bool, str)):
        return True
    return (
        isinstance(value, (tuple, list))
        and bool(value)
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value)
    )


def size_vars(tree: ast.Module, namespace: dict[str, Any]) -> dict[str, Any]:
    """Module-level names assigned a size value: the knobs ``--set`` may change."""
    names: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.AugAssign):
            continue
        for name in bound_names(node):
            if not name.startswith("_") and name != "KILN" and is_size_value(namespace.get(name)):
                names[name] = namespace[name]
    return names


def roots(tree: ast.Module) -> set[str]:
    """Size names assigned only from literals (``N = 2048``, ``h, w = 32, 32``), not derived from other names."""
    literal: set[str] = set()
    derived: set[str] = set()
    for node in tree.body:
        value = getattr(node, "value", None)
        names = bound_names(node)
        plain = (
            value is not None
            and not isinstance(node, ast.AugAssign)
            and not any(isinstance(n, ast.Name) for n in ast.walk(value))
        )
        (literal if plain else derived).update(names)
    return literal - derived


def with_sets(tree: ast.Module, names: set[str]) -> ast.Module:
    """``tree`` with ``NAME = __kiln_set__['NAME']`` after each top-level assignment to a name in ``names``."""
    body: list[ast.stmt] = []
    for node in tree.body:
        body.append(node)
        for name in bound_names(node):
            if name in names:
                read = ast.Subscript(ast.Name(_SET, ast.Load()), ast.Constant(name), ast.Load())
                body.append(ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], read), node))
    return ast.fix_missing_locations(ast.Module(body=body, type_ignores=tree.type_ignores))


def execute(path: Path, tree: ast.Module, name: str, sets: dict[str, Any], where: str) -> types.ModuleType:
    """A fresh module: ``tree`` run with ``sets`` bound; a failure is a one-line UserError naming ``where``."""
    code = compile(with_sets(tree, set(sets)), str(path), "exec")
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__dict__[_SET] = copy.deepcopy(sets)  # a list value must not be shared between modules
    try:
        exec(code, module.__dict__)
    except Exception as exc:
        raise UserError(
            f"{where}: the module's top level fails at these sizes: {type(exc).__name__}: {first_line(exc)}"
        ) from None
    finally:
        module.__dict__.pop(_SET, None)
    return module


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def key(sizes: dict[str, Any]) -> str:
    """A cache key for one setting of the size variables."""
    return repr(sorted(sizes.items()))
