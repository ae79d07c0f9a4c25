"""Code that runs only while the candidate is constructed, before it has seen any input.

A generated candidate copies the reference's classes to build the same parameters, and
their ``__init__`` may compute with a reference op (SwinV2's ``torch.log(10 * ones)`` for
its logit scale). A call there computes on no input, so the gate allows it; it allows
nothing that could run such a call on forward's data:

- the call's innermost scope is the ``__init__`` method itself (a lambda, a generator
  expression or a function defined there runs later, and is not exempt);
- every mention of that ``__init__``'s class (a constructor call, an alias, a base class)
  is itself in such an ``__init__`` of a class that qualifies, so only the harness's
  construction of ModelNew reaches it (the greatest such set of classes: a class may name
  itself in its own ``__init__``, as ``super(ModelNew, self)`` does);
- no ``__init__`` is reached as an attribute outside an ``__init__`` (``self.__init__(x)``
  in forward would run it again on forward's data), and no classmethod builds its class as
  ``cls(...)``; where either is, no class qualifies. Reading an attribute off a class
  (``ModelNew.instances``) builds nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

_OPAQUE = (ast.Lambda, ast.GeneratorExp, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _walk(node: ast.AST, scope: ast.AST | None) -> Iterator[tuple[ast.AST, ast.AST | None]]:
    """Every node under ``node`` with its innermost deferred scope (a function, lambda, generator or class)."""
    for child in ast.iter_child_nodes(node):
        yield child, scope
        yield from _walk(child, child if isinstance(child, _OPAQUE) else scope)


def construction_calls(tree: ast.Module) -> set[int]:
    """The ids of the ``ast.Attribute`` nodes called directly in an ``__init__`` that runs only at construction."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    inits = {
        id(f): name
        for name, c in classes.items()
        for f in c.body
        if isinstance(f, ast.FunctionDef) and f.name == "__init__"
    }
    nodes = list(_walk(tree, None))
    outside = any(
        isinstance(n, ast.Attribute) and n.attr == "__init__" and id(scope) not in inits for n, scope in nodes
    )
    # a classmethod builds its class as cls(...) without naming it
    if outside or any(isinstance(n, ast.Name) and n.id == "classmethod" for n, _ in nodes):
        return set()
    # ModelNew.instances: an attribute of the class read or written, not a constructor (the gate refuses dunders)
    read_off = {id(n.value) for n, _ in nodes if isinstance(n, ast.Attribute) and n.attr != "__init__"}
    # (class mentioned, the class whose __init__ mentions it, or None where no qualifying __init__ could)
    mentions: list[tuple[str, str | None]] = []
    for n, scope in nodes:
        if isinstance(n, ast.Name) and n.id in classes and id(n) not in read_off:
            mentions.append((n.id, inits.get(id(scope))))
        elif isinstance(n, ast.ClassDef):
            for base in n.bases:
                for sub in ast.walk(base):
                    if isinstance(sub, ast.Name) and sub.id in classes:
                        # a subclass built anywhere runs its base's __init__: only as safe as the subclass
                        mentions.append((sub.id, n.name if n.name in classes else None))
    qualified = set(classes)
    changed = True
    while changed:
        changed = False
        for mentioned, where in mentions:
            if mentioned in qualified and (where is None or where not in qualified):
                qualified.discard(mentioned)
                changed = True
    return {
        id(n.func)
        for n, scope in nodes
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and inits.get(id(scope)) in qualified
    }
