"""Retrieval: a relevance pool, re-ranked by value, blended with the graph score.

The pool is the full-text top K (relevance alone decides it). Each member's value
score is relevance·(1 + λ·Q); the final score is
(1 − w)·value/max(value) + w·d/max(d), d the graph score of the attempt the experience
was distilled from (0 when it has none), maxima taken over the pool (w = 0 when no member has a graph score).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from kernelkiln.memory.config import GraphConfig, RetrievalConfig
from kernelkiln.memory.graph import ExperienceGraph
from kernelkiln.store.attempts import GraphNode
from kernelkiln.store.records import Experience
from kernelkiln.store.search import search_experiences
from kernelkiln.store.store import Store

_GRAPH_CACHE_TASKS = 1024


@dataclass(frozen=True)
class Retrieved:
    """One retrieved experience and how it ranked."""

    experience: Experience
    relevance: float
    value_score: float
    graph_score: float
    score: float


def value_score(relevance: float, q: float, lam: float) -> float:
    """relevance·(1 + λ·Q)."""
    return relevance * (1.0 + lam * q)


def blend(value: float, max_value: float, graph: float, max_graph: float, graph_weight: float) -> float:
    """(1 − w)·value/max_value + w·graph/max_graph (a zero maximum contributes 0)."""
    v = value / max_value if max_value > 0 else 0.0
    g = graph / max_graph if max_graph > 0 else 0.0
    return (1.0 - graph_weight) * v + graph_weight * g


class Retriever:
    """Finds the experiences worth showing an agent."""

    def __init__(self, store: Store, config: RetrievalConfig | None = None, graph: GraphConfig | None = None):
        self.store = store
        self.config = config or RetrievalConfig()
        self.graph_config = graph or GraphConfig()
        # task -> (attempt count, scores): attempts are append-only, so an unchanged count
        # means an unchanged graph, and its scores need not be recomputed on every retrieval.
        self._graphs: OrderedDict[str, tuple[int, dict[str, float]]] = OrderedDict()
        self._graphs_lock = threading.Lock()  # agents retrieve at once (the run's memory lock is shared)

    def retrieve(
        self,
        query: str,
        *,
        platform: str | None = None,
        op_family: str | None = None,
        stage: str | None = None,
        limit: int | None = None,
        kinds: tuple[str, ...] = ("experience",),
    ) -> list[Retrieved]:
        """The best ``limit`` experiences for ``query`` among those whose tags fit (None: the whole pool)."""
        c = self.config
        with self.store.read() as conn:
            pool = search_experiences(
                conn,
                query,
                limit=c.pool_size,
                platform=platform,
                op_family=op_family,
                stage=stage,
                kinds=kinds,
                postings_budget=c.postings_budget,
            )
            graph_scores = self._graph_scores(conn, [e for e, _ in pool]) if c.graph_weight > 0 else {}
        values = [value_score(rel, exp.q, c.lam) for exp, rel in pool]
        graphs = [graph_scores.get(exp.source_attempt_id or "", 0.0) for exp, _ in pool]
        max_value, max_graph = max(values, default=0.0), max(graphs, default=0.0)
        weight = c.graph_weight if max_graph > 0 else 0.0  # no graph in the pool: value alone
        ranked = [
            Retrieved(exp, rel, v, g, blend(v, max_value, g, max_graph, weight))
            for (exp, rel), v, g in zip(pool, values, graphs, strict=False)
        ]
        ranked.sort(key=lambda r: (-r.score, -r.relevance, r.experience.id))
        return ranked[:limit]

    def _graph_scores(self, conn: Connection, experiences: list[Experience]) -> dict[str, float]:
        sources = sorted({e.source_attempt_id for e in experiences if e.source_attempt_id})
        if not sources:
            return {}
        sizes = self.store.attempts.task_sizes(conn, sources)
        with self._graphs_lock:
            stale = [task for task, n in sizes.items() if self._graphs.get(task, (-1, {}))[0] != n]
            if stale:
                by_task: dict[str, list[GraphNode]] = {}
                for node in self.store.attempts.graph_nodes_of_tasks(conn, stale):
                    by_task.setdefault(node.task_id, []).append(node)
                for task, nodes in by_task.items():
                    self._graphs[task] = (len(nodes), ExperienceGraph(nodes, self.graph_config).scores())
            scores: dict[str, float] = {}
            for task in sizes:
                self._graphs.move_to_end(task)
                scores.update(self._graphs[task][1])
            while len(self._graphs) > _GRAPH_CACHE_TASKS:
                self._graphs.popitem(last=False)
        return scores
