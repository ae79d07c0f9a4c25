"""The package's imports flow one way: no module circle, no package reaching up a layer.

docs/architecture.md's table is the one description of the layers; a test below holds it to ``RANK``.

Every import counts, including those inside functions (a deferred import is still a
dependency) and under TYPE_CHECKING.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "kernelkiln"  # this checkout's package, whichever is installed
# Candidates, seeds and suite tasks are data the guard loads, not modules of the package.
DATA = ("testing/hostile", "testing/candidates", "testing/tasks", "suites", "examples/seeds")

# cli -> orchestrator -> agents -> context -> policy -> evaluation -> guard | memory -> ... -> errors.
# A package may import only packages of a lower rank (packages of equal rank never each other).
RANK = {
    "errors": 1,
    "kernelkiln": 1,
    "stats": 1,
    "atomic": 1,
    "speedup": 1,
    "rwlock": 1,
    "torch_threads": 1,
    "threadsafe_ast": 0,  # below the package root, which installs it before anything parses
    "isolation": 2,
    "task": 2,
    "llm": 2,
    "store": 2,
    "native": 3,
    "platforms": 4,
    "lowering": 5,
    "guard": 6,
    "memory": 6,
    "evaluation": 7,  # pools judge candidates with the guard; the search loop hands them over
    "policy": 8,
    "context": 9,
    "agents": 10,
    "orchestrator": 11,
    "examples": 12,
    "bench": 12,
    "report": 12,
    "model": 13,  # whole models: capture and splice around the orchestrator's runs; the cli drives it
    "cli": 14,
    "__main__": 15,
    "testing": 16,  # fakes over every layer: tests import them, no product module does
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if any(rel.startswith(d + "/") for d in DATA):
            continue
        parts = ("kernelkiln", *path.relative_to(ROOT).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports: ``from X import Y`` counts as X.Y when that is a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    if name == "kernelkiln":
        # The root's __getattr__ hands out the public API (kernelkiln.optimize_model) on first use: an entry
        # at the top of the layers that nothing below calls, not an import of the root's own.
        tree.body = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name == "__getattr__")]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in modules:
                    out.add(target)
                elif base in modules:
                    out.add(base)
    out.discard(name)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "kernelkiln"


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    return circles


def test_no_module_of_the_package_imports_itself_through_a_circle():
    assert _circles(_graph()) == []


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_package_has_a_layer():
    assert {_package(m) for m in _graph()} <= set(RANK)


def test_no_package_imports_one_of_its_own_layer_or_above():
    upward = sorted(
        f"{a} -> {b}"
        for a, targets in _graph().items()
        for b in targets
        if _package(a) != _package(b) and RANK[_package(b)] >= RANK[_package(a)]
    )
    assert upward == []


def _commands() -> set[str]:
    """The command modules of cli/: those ``kernelkiln.cli.app`` imports to register."""
    app = ROOT / "cli" / "app.py"
    return {
        f"kernelkiln.cli.{alias.name}"
        for node in ast.walk(ast.parse(app.read_text(), str(app)))
        if isinstance(node, ast.ImportFrom) and node.module == "kernelkiln.cli"
        for alias in node.names
    }


def _command_crossings(graph: dict[str, set[str]], commands: set[str]) -> list[str]:
    """Imports of a command module by any module of cli/ but the app that registers them."""
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        if a.startswith("kernelkiln.cli.") and a != "kernelkiln.cli.app"
        for b in targets
        if b in commands
    )


def test_the_commands_are_the_modules_the_app_registers():
    assert {"kernelkiln.cli.optimize", "kernelkiln.cli.eval", "kernelkiln.cli.lower"} <= _commands()
    assert "kernelkiln.cli.settings" not in _commands()


def test_no_module_of_cli_imports_a_command_module():
    # Shared options, progress, output and task paths live in cli's floor modules, which commands import.
    assert _command_crossings(_graph(), _commands()) == []


def test_the_crossing_finder_finds_a_command_importing_another():
    graph = {
        "kernelkiln.cli.app": {"kernelkiln.cli.a", "kernelkiln.cli.b"},
        "kernelkiln.cli.a": {"kernelkiln.cli.b", "kernelkiln.cli.floor"},
        "kernelkiln.cli.floor": {"kernelkiln.cli.b"},
        "kernelkiln.cli.b": {"kernelkiln.cli.floor"},
    }
    assert _command_crossings(graph, {"kernelkiln.cli.a", "kernelkiln.cli.b"}) == [
        "kernelkiln.cli.a -> kernelkiln.cli.b",
        "kernelkiln.cli.floor -> kernelkiln.cli.b",
    ]


def test_the_architecture_page_gives_every_package_the_rank_this_test_holds_it_to():
    # docs/architecture.md is the one description of the layering: its table and RANK must agree
    import re

    page = (ROOT.parent / "docs" / "architecture.md").read_text()
    described: dict[str, int] = {}
    for rank, packages in re.findall(r"^\| (\d+) \| (.+?) \|", page, flags=re.MULTILINE):
        for name in re.findall(r"`([a-z_]+)/?`", packages):
            described[name] = int(rank)
    assert described == {name: rank for name, rank in RANK.items() if name != "kernelkiln"}
