"""Memory: the facade the optimizer and the CLI use over the store."""

from __future__ import annotations

import threading
from typing import Any

from kernelkiln.errors import UserError
from kernelkiln.memory.board import Board
from kernelkiln.memory.callbacks import MemoryCallbacks, add_lesson
from kernelkiln.memory.config import MemoryConfig
from kernelkiln.memory.graph import ExperienceGraph
from kernelkiln.memory.knowledge import platforms as knowledge_platforms
from kernelkiln.memory.knowledge import seed_knowledge
from kernelkiln.memory.prior import Prior, build
from kernelkiln.memory.prune import PruneReport, prune
from kernelkiln.memory.retrieval import Retrieved, Retriever
from kernelkiln.memory.rules import Consolidator
from kernelkiln.memory.tokens import TokenCounter, estimate_tokens
from kernelkiln.store.records import Attempt, Experience, Rule, Signature
from kernelkiln.store.store import Store


class Memory:
    """Experiences, graph, rules and board over one store.

    ``lent``: a store whose memory is lent read-only (``--memory-readonly``): experiences, rules
    and what stored tasks teach (``prior``) are read from it and nothing is ever written to it;
    ``store`` then only keeps the run's own records (its attempts, its tasks' boards), and no
    lesson, value or rule is learned.
    """

    def __init__(
        self,
        store: Store,
        config: MemoryConfig | None = None,
        tokens: TokenCounter = estimate_tokens,
        lent: Store | None = None,
    ):
        self.store = store
        self.lent = lent
        self.config = config or MemoryConfig()
        if self.config.readonly and lent is None:
            raise UserError("read-only memory needs the store it is lent from: Memory(own_store, config, lent=store)")
        source = lent or store
        self.retriever = Retriever(source, self.config.retrieval, self.config.graph)
        self._knowledge = Retriever(store, self.config.retrieval, self.config.graph) if lent else self.retriever
        self.board = Board(store, self.config.board)
        self.consolidator = Consolidator(source, self.config.rules, tokens)
        self.callbacks = MemoryCallbacks(store, self.config, self.consolidator, learn=lent is None, board=self.board)
        self._seeded: set[str] = set()
        self._seeding = threading.Lock()  # agents read memory at once

    def configured(self, config: MemoryConfig) -> Memory:
        """This memory under ``config`` (itself when unchanged): a run brings its own memory settings."""
        return self if config == self.config else Memory(self.store, config, self.consolidator.tokens, self.lent)

    def prior(self, signature: Signature, run_id: str | None) -> Prior:
        """What stored tasks lend the search of a task with ``signature`` (never run ``run_id``'s own attempts)."""
        return build(self.lent or self.store, signature, run_id, self.config.transfer)

    def add_experience(self, experience: Experience) -> Experience:
        """Store a new experience; its cold frequency counts stages from now on."""
        with self.store.write() as conn:
            return add_lesson(self.store, conn, experience)

    def retrieve(self, query: str, **filters: Any) -> list[Retrieved]:
        """Experiences for ``query`` (see ``Retriever.retrieve`` for the filters)."""
        return self.retriever.retrieve(query, **filters)

    def knowledge(self, query: str, platform: str, limit: int | None = None) -> list[Retrieved]:
        """Cold-layer knowledge sections for ``query`` on ``platform`` (seeded on first use)."""
        self.ensure_knowledge([platform])
        return self._knowledge.retrieve(query, platform=platform, kinds=("knowledge",), limit=limit)

    def seed_knowledge(self, platform: str) -> int:
        """Store the platform's cold-start documents; returns how many sections changed."""
        self._seeded.add(platform)
        return seed_knowledge(self.store, platform)

    def ensure_knowledge(self, platforms: list[str] | None = None) -> None:
        """Seed the platforms' documents (default: all) unless this Memory already did."""
        with self._seeding:
            for platform in platforms if platforms is not None else knowledge_platforms():
                if platform not in self._seeded:
                    self.seed_knowledge(platform)

    def resident_rules(self) -> list[tuple[Rule, Experience]]:
        """The resident rules with the experiences they were distilled from (same id, same Q), highest Q first.

        A rule's experience is never pruned while the rule is resident (residency needs Q > 0).
        """
        source = self.lent or self.store
        with source.read() as conn:
            rules = source.rules.list(conn, resident=True)
            sources = source.experiences.get_many(conn, [r.id for r in rules])
        pairs = [(r, sources[r.id]) for r in rules if r.id in sources]
        return sorted(pairs, key=lambda p: (-p[1].q, p[0].id))

    def graph(self, task_id: str) -> ExperienceGraph:
        """The experience graph of one task."""
        with self.store.read() as conn:
            return ExperienceGraph(self.store.attempts.for_task(conn, task_id), self.config.graph)

    def ranked_attempts(self, task_id: str, limit: int) -> list[Attempt]:
        """The task's ``limit`` best-scoring correct attempts by graph score d(v), whole records.

        The graph is scored on its light nodes; only the attempts shown are read with their code.
        """
        with self.store.read() as conn:
            nodes = self.store.attempts.graph_nodes(conn, task_id)
            ranked = [n.id for n, _ in ExperienceGraph(nodes, self.config.graph).ranked() if n.correct][:limit]
            found = self.store.attempts.get_many(conn, ranked)
        return [found[i] for i in ranked if i in found]

    def prune(self, dry_run: bool = False) -> PruneReport:
        """See ``kernelkiln.memory.prune``."""
        return prune(self.store, self.config, dry_run=dry_run)

    def stats(self) -> dict[str, Any]:
        """Counts of everything memory holds."""
        s = self.store
        with s.read() as conn:
            return {
                "url": s.url,
                "schema_version": s.schema_version(),
                "runs": len(s.runs.all(conn)),
                "tasks": len(s.tasks.all(conn)),
                "attempts": s.attempts.count(conn),
                "experiences": s.experiences.count(conn, "experience"),
                "knowledge_sections": s.experiences.count(conn, "knowledge"),
                "rules": len(s.rules.list(conn)),
                "resident_rules": len(s.rules.list(conn, resident=True)),
                "stages": s.stages.count_since(conn, 0),
                "board_entries": s.board.count(conn),
                "signatures": len(s.signatures.all(conn)),
            }
