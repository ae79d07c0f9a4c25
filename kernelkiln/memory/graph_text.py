"""The experience graph as text: an indented tree with the best path marked."""

from __future__ import annotations

from typing import Any

from kernelkiln.memory.graph import ExperienceGraph
from kernelkiln.speedup import fmt_x


def graph_records(graph: ExperienceGraph) -> list[dict[str, Any]]:
    """One plain record per node (for JSON output), oldest first."""
    scores, path = graph.scores(), set(graph.best_path())
    return [
        {
            "id": a.id,
            "parent_id": a.parent_id,
            "verdict": a.verdict,
            "speedup": a.speedup,
            "relative_speedup": graph.relative_speedup(a.id),
            "score": scores[a.id],
            "on_best_path": a.id in path,
            "agent": a.agent,
            "lens": a.lens,
            "summary": a.summary,
        }
        for a in sorted(graph.nodes.values(), key=lambda a: (a.created_at, a.id))
    ]


def render_tree(graph: ExperienceGraph) -> str:
    """Lines like ``├── * a-… KEEP 1.50x d=2.40 summary``; ``*`` marks the best path."""
    scores, path = graph.scores(), graph.best_path()
    on_path, best = set(path), (path[-1] if path else None)
    lines: list[str] = []

    def label(node_id: str) -> str:
        a = graph.nodes[node_id]
        speed = fmt_x(a.speedup)
        who = "/".join(p for p in (a.agent, a.lens) if p)
        parts = ["*" if node_id in on_path else " ", a.id, a.verdict, speed, f"d={scores[node_id]:.2f}"]
        if who:
            parts.append(f"[{who}]")
        if a.summary:
            parts.append(a.summary)
        if node_id == best:
            parts.append("← best")
        return " ".join(parts)

    def ordered(ids: list[str]) -> list[str]:
        return sorted(ids, key=lambda i: (graph.nodes[i].created_at, i))

    stack = [(root, "", "", True) for root in reversed(ordered(graph.roots))]
    while stack:
        node_id, prefix, connector, _ = stack.pop()
        lines.append(f"{prefix}{connector}{label(node_id)}")
        children = ordered(graph.children[node_id])
        child_prefix = prefix + ("" if not connector else ("    " if connector == "└── " else "│   "))
        for i in reversed(range(len(children))):
            last = i == len(children) - 1
            stack.append((children[i], child_prefix, "└── " if last else "├── ", last))
    return "\n".join(lines)
