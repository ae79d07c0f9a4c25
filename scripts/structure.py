"""The structure's figures: modules, import edges (the layering test's walker), lines per package, the largest
modules and functions, and the modules that import ``OptimizeConfig``.

    python scripts/structure.py [--json]
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("layering", ROOT / "tests" / "test_layering.py")
assert spec is not None and spec.loader is not None
layering = importlib.util.module_from_spec(spec)
spec.loader.exec_module(layering)


def _functions(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None:
            out.append((node.end_lineno - node.lineno + 1, f"{path.relative_to(ROOT)}:{node.name}"))
    return out


def figures() -> dict[str, object]:
    graph = layering._graph()
    modules = layering._modules()
    packages = {layering._package(m) for m in graph}
    package_edges = {
        (layering._package(a), layering._package(b))
        for a, targets in graph.items()
        for b in targets
        if layering._package(a) != layering._package(b)
    }
    lines = {name: len(path.read_text().splitlines()) for name, path in modules.items()}
    per_package: Counter[str] = Counter()
    for name, count in lines.items():
        per_package[layering._package(name)] += count
    functions = sorted((f for path in modules.values() for f in _functions(path)), reverse=True)
    importers = sorted(
        name
        for name, path in modules.items()
        if any(
            isinstance(n, ast.ImportFrom) and any(a.name == "OptimizeConfig" for a in n.names)
            for n in ast.walk(ast.parse(path.read_text()))
        )
    )
    return {
        "modules": len(graph),
        "packages": len(packages),
        "module_edges": sum(len(t) for t in graph.values()),
        "package_edges": len(package_edges),
        "circles": len(layering._circles(graph)),
        "lines": dict(sorted(per_package.items())),
        "largest_modules": [f"{modules[n].relative_to(ROOT)} {c}" for n, c in Counter(lines).most_common(5)],
        "largest_functions": [f"{name} {n}" for n, name in functions[:5]],
        "optimize_config_importers": importers,
    }


if __name__ == "__main__":
    data = figures()
    if "--json" in sys.argv:
        print(json.dumps(data, indent=1))
    else:
        for key, value in data.items():
            print(f"{key}: {value}")
