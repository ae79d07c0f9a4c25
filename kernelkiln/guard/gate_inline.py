"""The gate's reading of KernelBench's candidate forms: ``load_inline`` calls, and toolchains it does not build."""

from __future__ import annotations

import ast

from kernelkiln.guard.gate_rules import CPP_EXTENSION, FOREIGN_TOOLCHAINS

LOAD_INLINE = f"{CPP_EXTENSION}.load_inline"


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of attributes on a name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def calls_load_inline(call: ast.Call, modules: dict[str, str]) -> bool:
    """Whether ``call`` calls torch's ``load_inline``, by an imported name or spelled out from ``torch``."""
    path = dotted(call.func)
    if path is None:
        return False
    root, _, rest = path.partition(".")
    resolved = modules.get(root, root) + (f".{rest}" if rest else "")
    return resolved == LOAD_INLINE


def cuda_sources(call: ast.Call) -> bool:
    """Whether a ``load_inline`` call passes CUDA sources (the third argument, or ``cuda_sources=``)."""
    given = [k.value for k in call.keywords if k.arg in ("cuda_sources", "with_cuda")]
    if len(call.args) > 2:
        given.append(call.args[2])
    return any(not (isinstance(v, ast.Constant) and v.value in (None, "", False)) for v in given)


def foreign_toolchain(tree: ast.AST) -> tuple[int, str] | None:
    """The line and one-line reason when the candidate is written for a toolchain kernelkiln does not build."""
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.Import):
            texts = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            texts = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            texts = [node.value]
        kind = "text" if isinstance(node, ast.Constant) else "module"
        for text in texts:
            for where, marker, what in FOREIGN_TOOLCHAINS:
                # A module's marker is one of its dotted components (or a run of them).
                found = f".{marker}." in f".{text}." if kind == "module" else marker in text
                if where == kind and found:
                    return getattr(node, "lineno", 1), f"{what}; kernelkiln does not build it"
    return None
