"""The gate: static checks of a candidate's source, before any of it runs."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from kernelkiln.guard.construction import construction_calls
from kernelkiln.guard.gate_inline import LOAD_INLINE, calls_load_inline, cuda_sources, dotted, foreign_toolchain
from kernelkiln.guard.gate_rules import (
    ABC_MODULE,
    ABC_NAMES,
    ALLOWED_FROM,
    ALLOWED_IMPORTS,
    BANNED_ATTRS,
    BANNED_NAMES,
    BANNED_TORCH_ATTRS,
    CPP_EXTENSION,
    CPP_EXTENSION_API,
    DEVICE_TORCH_ATTRS,
    NATIVE_API,
    TRITON_INTERNALS,
    TRITON_MODULES,
    triton_refusal,
)


def _root_chain(node: ast.Attribute) -> list[ast.AST]:
    """The attributes read straight off the root name under ``node`` (outermost first), then that name: for
    ``collections.abc.sys.modules["os"].environ`` the nodes of ``collections.abc.sys.modules``."""
    chain: list[ast.AST] = []
    current: ast.AST = node
    while isinstance(current, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(current, ast.Attribute):
            chain.append(current)
            current = current.value
        else:  # what came before a subscript or a call is not read off the name
            chain = []
            current = current.func if isinstance(current, ast.Call) else current.value
    return [*chain, current]


def _abc_class(path: str, module: str) -> bool:
    """Whether ``path`` (``collections.abc.Iterable``, ``cabc.Iterable.register``) names a base class of
    collections.abc, or something of one, from its alias bound to ``module``."""
    parts = path.split(".")
    if module == "collections":
        return len(parts) >= 3 and parts[1] == "abc" and parts[2] in ABC_NAMES
    return len(parts) >= 2 and parts[1] in ABC_NAMES


def _kernels(tree: ast.AST) -> set[str]:
    """Names of functions decorated with triton's ``jit`` (any spelling ending in ``jit``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                dec = dec.func if isinstance(dec, ast.Call) else dec
                if (dec.attr if isinstance(dec, ast.Attribute) else getattr(dec, "id", "")) == "jit":
                    names.add(node.name)
    return names


_Binding = str | ast.expr | None  # an import's module path, an assigned value, or anything else


def _bindings(tree: ast.AST) -> dict[str, list[_Binding]]:
    """Every binding of each name anywhere in the module, whatever its scope."""
    values: dict[int, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                values[id(target)] = value
    found: dict[str, list[_Binding]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            found.setdefault(node.id, []).append(values.get(id(node)))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                path = alias.name if alias.asname else alias.name.split(".")[0]
                found.setdefault(alias.asname or path, []).append(path)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                source = f"{node.module}.{alias.name}" if not node.level else None
                found.setdefault(alias.asname or alias.name, []).append(source)
        else:
            for name in _defined(node):
                found.setdefault(name, []).append(None)
    return found


def _defined(node: ast.AST) -> list[str]:
    """Names ``node`` binds other than by assignment or import: definitions, parameters, handlers, patterns."""
    if isinstance(
        node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler, ast.MatchAs, ast.MatchStar)
    ):
        names = [node.name]
    elif isinstance(node, ast.arg):
        names = [node.arg]
    elif isinstance(node, ast.MatchMapping):
        names = [node.rest]
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        names = list(node.names)
    else:
        names = []
    return [name for name in names if name]


def _native_libraries(tree: ast.AST) -> frozenset[str]:
    """Names every binding of which is a call to kernelkiln's ``native.load`` or torch's ``load_inline``: the
    candidate's own libraries."""
    bindings = _bindings(tree)

    def only(name: str, path: str) -> bool:
        return bool(bindings.get(name)) and all(b == path for b in bindings[name])

    def loads(value: _Binding) -> bool:
        func = value.func if isinstance(value, ast.Call) else None
        if func is not None and dotted(func) == LOAD_INLINE:
            return True
        if isinstance(func, ast.Name) and only(func.id, LOAD_INLINE):
            return True
        if isinstance(func, ast.Name):
            return only(func.id, "kernelkiln.native.load")
        if not isinstance(func, ast.Attribute) or func.attr != "load":
            return False
        if isinstance(func.value, ast.Name):
            return only(func.value.id, "kernelkiln.native")
        return (
            isinstance(func.value, ast.Attribute)
            and func.value.attr == "native"
            and isinstance(func.value.value, ast.Name)
            and only(func.value.value.id, "kernelkiln")
        )

    return frozenset(name for name, values in bindings.items() if all(map(loads, values)))


@dataclass(frozen=True)
class GateIssue:
    """One reason to refuse a candidate, with its location."""

    line: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"severity": "error", "line": self.line, "column": None, "message": self.message}


class _Gate(ast.NodeVisitor):
    def __init__(self, forbidden_ops: frozenset[str], tree: ast.AST, platform: str):
        self.forbidden = forbidden_ops
        self.platform = platform
        self.kernels = _kernels(tree)
        self.native_libraries = _native_libraries(tree)
        self.triton = any(
            (isinstance(n, ast.Import) and any(a.name.split(".")[0] == "triton" for a in n.names))
            or (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "triton")
            for n in ast.walk(tree)
        )
        self.issues: list[GateIssue] = []
        self.modules: dict[str, str] = {}  # local alias -> module path
        self.judged: set[int] = set()  # a collections.abc chain's nodes, judged with its outermost attribute
        # reference ops called where only construction runs them, on no input (guard.construction)
        self.at_construction = construction_calls(tree) if isinstance(tree, ast.Module) else set()

    def flag(self, node: ast.AST, message: str) -> None:
        self.issues.append(GateIssue(getattr(node, "lineno", 0), message))

    def _root(self, node: ast.AST) -> str | None:
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            node = node.func if isinstance(node, ast.Call) else node.value
        return node.id if isinstance(node, ast.Name) else None

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name not in ALLOWED_IMPORTS and alias.name not in TRITON_MODULES and alias.name != ABC_MODULE:
                self.flag(node, f"import of {alias.name!r} is not allowed")
            self.modules[alias.asname or alias.name.split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0]
            )

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        for alias in node.names:
            full = f"{mod}.{alias.name}"
            if mod.split(".")[0] == "triton" and not node.level:
                why = "import of '*' is not allowed" if alias.name == "*" else triton_refusal(full)
                if why:
                    self.flag(node, why)
            elif mod == "kernelkiln.native" and not node.level:
                if alias.name not in NATIVE_API:
                    self.flag(node, f"kernelkiln.native.{alias.name} is not available to candidates (use native.load)")
            elif mod == CPP_EXTENSION and not node.level:
                if alias.name not in CPP_EXTENSION_API:
                    self.flag(node, f"{full} is not available to candidates (load_inline is: it builds in the sandbox)")
            elif mod == ABC_MODULE and not node.level:
                if alias.name not in ABC_NAMES:
                    self.flag(node, f"import of {full!r} is not allowed (collections.abc's base classes are)")
            elif (
                node.level
                or alias.name == "*"
                or not (full in ALLOWED_IMPORTS or alias.name in ALLOWED_FROM.get(mod, ()) or mod in ALLOWED_IMPORTS)
            ):
                self.flag(node, f"import of {full!r} is not allowed")
            self.modules[alias.asname or alias.name] = full

    def visit_Name(self, node: ast.Name) -> None:
        if self.modules.get(node.id) in ("collections", ABC_MODULE) and id(node) not in self.judged:  # as a value
            self.flag(node, f"{node.id} as a value is not allowed (collections.abc's base classes are)")
        if node.id in BANNED_NAMES:
            self.flag(node, f"use of {node.id!r} is not allowed")
        elif node.id.startswith("__") and node.id != "__name__":
            self.flag(node, f"access to {node.id!r} is not allowed")
        elif (op := self._imported_op(node.id)) is not None:
            self.flag(node, f"calls the reference op {op!r}")
        self.generic_visit(node)

    def _imported_op(self, name: str) -> str | None:
        """The forbidden op ``name`` was imported as (from torch import softmax [as s]), or None."""
        path = self.modules.get(name)
        if path is None:
            return None
        # A triton import keeps being judged by its local name only: tl.sum is a block primitive.
        spellings = [name] if path.startswith("triton") else [name, path.split(".")[-1]]
        return next((s for s in spellings if s.lower().rstrip("_") in self.forbidden), None)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr, root = node.attr, self._root(node.value)
        module = self.modules.get(root or "", "")
        path = dotted(node)
        if module == "torch" and path is not None and path.startswith(f"{root}.utils.cpp_extension."):
            if path.split(".", 1)[1] != LOAD_INLINE.split(".", 1)[1]:
                self.flag(node, f"torch{path[len(root or '') :]} is not available to candidates (load_inline is)")
            return  # nothing below load_inline's own path to judge
        if module in ("collections", ABC_MODULE):
            if id(node) not in self.judged:  # a chain is judged from its outermost attribute, once
                chain = _root_chain(node)
                self.judged.update(id(n) for n in chain)
                prefix = ".".join([cast(ast.Name, chain[-1]).id, *(cast(ast.Attribute, n).attr for n in chain[-2::-1])])
                if not _abc_class(prefix, module):
                    self.flag(node, f"{prefix} is not allowed (collections.abc's base classes are)")
            self.generic_visit(node)
            return
        if attr.startswith("__") and attr != "__init__":
            self.flag(node, f"access to {attr!r} is not allowed")
        elif attr.startswith("_") and module:
            self.flag(node, f"access to private {module}.{attr} is not allowed")
        elif module.startswith("torch") and attr in BANNED_TORCH_ATTRS:
            self.flag(node, f"torch.{attr} is not allowed in candidates")
        elif (
            module == "torch"
            and isinstance(node.value, ast.Name)
            and attr in DEVICE_TORCH_ATTRS
            and self.platform == "cpu"
        ):
            self.flag(node, f"torch.{attr} is not available on the cpu platform")
        elif module.startswith("kernelkiln") and attr not in NATIVE_API:
            self.flag(node, f"kernelkiln.native.{attr} is not available to candidates (use native.load)")
        elif module.startswith("triton") and (why := self._triton_path(node, module)) is not None:
            self.flag(node, why)
        elif isinstance(node.value, ast.Name) and node.value.id in self.kernels:
            self.flag(node, f"{node.value.id}.{attr} is not allowed (launch Triton kernels as kernel[grid](...))")
        elif (
            self.triton
            and root != "self"
            and (attr in TRITON_INTERNALS or (attr.startswith("_") and not attr.startswith("__")))
        ):
            self.flag(
                node, f"access to .{attr} is not allowed in Triton candidates (launch kernels as kernel[grid](...))"
            )
        elif attr in BANNED_ATTRS and root != "self":
            self.flag(node, f"access to .{attr} is not allowed")
        elif (
            attr.lower().rstrip("_") in self.forbidden
            and root != "self"
            and not attr[:1].isupper()
            and not module.startswith("triton")
            and not (isinstance(node.value, ast.Name) and node.value.id in self.native_libraries)
            and id(node) not in self.at_construction
        ):
            # self.linear (a submodule) and nn.Linear (a parameter holder) are fine to touch; calling
            # them runs the reference op, which the run-time recorder catches. tl.sum and tl.softmax are
            # block primitives inside a kernel; lib.relu, on a library native.load built, is the
            # candidate's own code; torch.log(10 * ones) in an __init__ only construction runs sees no input.
            self.flag(node, f"calls the reference op {attr!r} (reimplement it instead)")
        self.generic_visit(node)

    @staticmethod
    def _triton_path(node: ast.Attribute, module: str) -> str | None:
        """Why a dotted name rooted at a triton import is refused; None when allowed or not a plain name."""
        parts: list[str] = []
        value: ast.AST = node
        while isinstance(value, ast.Attribute):
            parts.append(value.attr)
            value = value.value
        if not isinstance(value, ast.Name):
            return None  # an attribute of a value (a tensor a call returned), not of the module
        return triton_refusal(".".join([module, *reversed(parts)]))

    def visit_Call(self, node: ast.Call) -> None:
        if calls_load_inline(node, self.modules) and cuda_sources(node):
            if self.platform == "cpu":
                self.flag(
                    node,
                    "load_inline with cuda_sources is a CUDA candidate: it needs a CUDA GPU (on the cpu "
                    "platform load_inline builds C++ sources)",
                )
            else:
                self.flag(
                    node,
                    "load_inline's cuda_sources are not built by kernelkiln yet: write the CUDA kernel "
                    "with native.load(SOURCE, {...}, lang='cuda') or Triton",
                )
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and "matmul" in self.forbidden:
            self.flag(node, "calls the reference op 'matmul' (the @ operator)")
        self.generic_visit(node)

    def _assigned(self, targets: Iterable[ast.AST], node: ast.AST) -> None:
        for target in targets:
            for sub in ast.walk(target):
                root = self._root(sub.value) if isinstance(sub, ast.Attribute) else None
                if root is not None and root in self.modules:
                    self.flag(node, f"monkeypatching {self.modules[root]} is not allowed")
                    return

    def visit_Assign(self, node: ast.Assign) -> None:
        self._assigned(node.targets, node)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._assigned([node.target], node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._assigned([node.target], node)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._assigned(node.targets, node)
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
            if name == "Model":
                self.flag(node, "subclassing the reference Model is not allowed")
            elif name == "Tensor":
                self.flag(node, "tensor subclasses are not allowed")
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try | ast.TryStar) -> None:
        for handler in node.handlers:
            for sub in ast.walk(handler):
                if isinstance(sub, ast.Call) and self.modules.get(self._root(sub.func) or "", "").startswith("torch"):
                    self.flag(handler, "try/except fallback to a torch implementation is not allowed")
                    break
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_Global(self, node: ast.Global) -> None:
        self.flag(node, "global statements are not allowed")


def check(source: str, forbidden_ops: Iterable[str] = (), platform: str = "cpu") -> list[GateIssue]:
    """All the reasons to refuse ``source`` on ``platform``; empty when it may run."""
    try:
        tree = ast.parse(source, filename="candidate.py")
    except SyntaxError as exc:
        return [GateIssue(exc.lineno or 0, f"syntax error: {exc.msg}")]
    foreign = foreign_toolchain(tree)
    if foreign is not None:  # one line saying what it needs says more than every import it makes
        return [GateIssue(*foreign)]
    gate = _Gate(frozenset(forbidden_ops), tree, platform)
    gate.visit(tree)
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        gate.issues.append(GateIssue(1, "defines no top-level class ModelNew"))
    return sorted(dict.fromkeys(gate.issues), key=lambda i: i.line)  # a refused prefix of a.b.c is named once
