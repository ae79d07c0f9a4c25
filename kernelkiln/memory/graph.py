"""The experience graph: attempts as nodes, parent→child provenance edges, score d(v).

r_v = a_v / a_parent(v): 1.0 for a root, 0 for a failed node. When the parent failed
(it has no speedup) the nearest correct ancestor stands in for it, and a node with no
correct ancestor counts as a root.
d(v) = w_self·r_v + w_succ·γ·Σ_{u∈succ(v)} d(u).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

from kernelkiln.memory.config import GraphConfig


class Node(Protocol):
    """What the graph reads of an attempt (an ``Attempt`` or a store ``GraphNode``)."""

    @property
    def id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def verdict(self) -> str: ...
    @property
    def speedup(self) -> float | None: ...
    @property
    def created_at(self) -> float: ...
    @property
    def agent(self) -> str: ...
    @property
    def lens(self) -> str | None: ...
    @property
    def summary(self) -> str: ...
    @property
    def correct(self) -> bool: ...


class ExperienceGraph:
    """The attempt forest of one task (or any set of attempts) and its scores."""

    def __init__(self, attempts: Sequence[Node], config: GraphConfig | None = None) -> None:
        self.config = config or GraphConfig()
        self.nodes: dict[str, Node] = {a.id: a for a in attempts}
        self.children: dict[str, list[str]] = {a.id: [] for a in attempts}
        self.roots: list[str] = []
        for attempt in attempts:
            if attempt.parent_id in self.nodes and attempt.parent_id != attempt.id:
                self.children[attempt.parent_id].append(attempt.id)
            else:
                self.roots.append(attempt.id)
        self._scores: dict[str, float] | None = None

    def parent(self, node_id: str) -> Node | None:
        """The node's parent within the graph, if any."""
        parent_id = self.nodes[node_id].parent_id
        return self.nodes.get(parent_id) if parent_id else None

    def relative_speedup(self, node_id: str) -> float:
        """r_v for one node."""
        node = self.nodes[node_id]
        if not _succeeded(node):
            return 0.0
        ancestor = self.parent(node_id)
        seen = {node_id}
        while ancestor is not None and not _succeeded(ancestor) and ancestor.id not in seen:
            seen.add(ancestor.id)
            ancestor = self.parent(ancestor.id)
        if ancestor is None or not _succeeded(ancestor):
            return 1.0
        return cast(float, node.speedup) / cast(float, ancestor.speedup)  # both succeeded: speedups set

    def scores(self) -> dict[str, float]:
        """d(v) for every node, computed leaves first."""
        if self._scores is None:
            c = self.config
            scores: dict[str, float] = {}
            for node_id in self._post_order():
                successors = sum(scores.get(u, 0.0) for u in self.children[node_id])
                scores[node_id] = c.w_self * self.relative_speedup(node_id) + c.w_succ * c.gamma * successors
            self._scores = scores
        return self._scores

    def ranked(self, limit: int | None = None) -> list[tuple[Node, float]]:
        """Nodes by descending d(v) (ties: newer first)."""
        scores = self.scores()
        order = sorted(self.nodes.values(), key=lambda a: (-scores[a.id], -a.created_at, a.id))
        return [(a, scores[a.id]) for a in order[:limit]]

    def best(self) -> Node | None:
        """The correct node with the highest absolute speedup a_v."""
        correct = [a for a in self.nodes.values() if _succeeded(a)]
        return max(correct, key=lambda a: (a.speedup, -a.created_at)) if correct else None

    def best_path(self) -> list[str]:
        """Node ids from a root down to the best node (empty when nothing succeeded)."""
        best = self.best()
        path: list[str] = []
        node = best
        while node is not None and node.id not in path:
            path.append(node.id)
            node = self.parent(node.id)
        return list(reversed(path))

    def _post_order(self) -> list[str]:
        order: list[str] = []
        visited: set[str] = set()
        for root in self.roots:
            stack = [(root, False)]
            while stack:
                node_id, expanded = stack.pop()
                if expanded:
                    order.append(node_id)
                    continue
                if node_id in visited:
                    continue
                visited.add(node_id)
                stack.append((node_id, True))
                stack.extend((child, False) for child in self.children[node_id])
        # Nodes only reachable through a cycle (corrupt parent ids) still get a score.
        for node_id in self.nodes:
            if node_id not in visited:
                visited.add(node_id)
                order.append(node_id)
        return order


def _succeeded(attempt: Node) -> bool:
    return attempt.correct and attempt.speedup is not None and attempt.speedup > 0
