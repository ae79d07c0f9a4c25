"""What the orchestrator calls after each measured batch: memory's whole update.

``on_batch`` records every attempt (a graph node) with its adoption records, posts the
board conclusions its verdict implies, closes the stages the batch finished, applies
their ATU feedback to Q, fades the resident rules and rebuilds the resident set, all in
one transaction: a crash leaves either the whole batch or none of it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from pydantic import Field

from kernelkiln.memory.board import Board, entry_for_attempt
from kernelkiln.memory.config import MemoryConfig
from kernelkiln.memory.rules import Consolidator
from kernelkiln.memory.stages import StageOutcome, StageTracker
from kernelkiln.memory.value import apply_stage_values
from kernelkiln.store.records import Adoption, Attempt, Record, StageRecord, TaskRecord
from kernelkiln.store.store import Store

_CONSOLIDATION_LOCK = 0x6B6C6E31  # serializes stage closing across PostgreSQL writers


class AttemptResult(Record):
    """One measured attempt and the adoption records its agent made before evaluation."""

    attempt: Attempt
    adoptions: list[Adoption] = Field(default_factory=list)


class MemoryCallbacks:
    """Memory updates driven by the optimizer loop."""

    def __init__(self, store: Store, config: MemoryConfig | None = None, consolidator: Consolidator | None = None):
        self.store = store
        self.config = config or MemoryConfig()
        self.stages = StageTracker(self.config.value)
        self.board = Board(store, self.config.board)
        self.consolidator = consolidator or Consolidator(store, self.config.rules)

    def on_batch(self, results: Sequence[AttemptResult], tasks: Sequence[TaskRecord] = ()) -> list[StageRecord]:
        """Record a measured batch; returns the stages it closed (with their scores)."""
        closed: list[StageOutcome] = []
        snapshot = copy.deepcopy(self.stages)
        for result in results:
            closed.extend(self.stages.observe(result.attempt, result.adoptions))
        try:
            return self._record(results, tasks, closed)
        except BaseException:
            self.stages = snapshot  # the batch was not stored: forget it, so a retry counts it once
            raise

    def _record(self, results, tasks, closed: list[StageOutcome]) -> list[StageRecord]:
        store = self.store
        with store.write() as conn:
            for task in tasks:
                store.tasks.upsert(conn, task)
            given = {t.id for t in tasks}
            for task_id in sorted({r.attempt.task_id for r in results} - given):
                store.tasks.add_if_missing(conn, TaskRecord(id=task_id))
            posts = []
            for result in results:
                store.attempts.add(conn, result.attempt)
                store.adoptions.add_many(conn, result.adoptions)
                if self.config.board.auto_post and (entry := entry_for_attempt(self.board, result.attempt)):
                    posts.append(entry)
            # Tasks in a fixed order: concurrent batches take the per-task board locks alike.
            for entry in sorted(posts, key=lambda e: e.task_id):
                store.board.post(conn, entry, self.config.board.horizon)
            return self._close(conn, closed)

    def replay(self, results: Sequence[AttemptResult]) -> None:
        """Rebuild the open stages from attempts already stored (resuming a run); stores nothing."""
        for result in results:
            self.stages.observe(result.attempt, result.adoptions)

    def on_adoptions(self, adoptions: Sequence[Adoption]) -> None:
        """Store an agent's adoption records as soon as it makes them, before evaluation.

        ``on_batch`` stores them too (duplicates are skipped); this keeps them if the
        evaluation never reports back.
        """
        with self.store.write() as conn:
            self.store.adoptions.add_many(conn, list(adoptions))

    def on_task_end(self, task_id: str, agent: str = "") -> list[StageRecord]:
        """Close the open stage of (task, agent) when the loop stops working on it."""
        snapshot = copy.deepcopy(self.stages)
        closed = self.stages.end(task_id, agent)
        if not closed:
            return []
        try:
            with self.store.write() as conn:
                return self._close(conn, closed)
        except BaseException:
            self.stages = snapshot
            raise

    def on_run_end(self) -> list[StageRecord]:
        """Close every stage still open."""
        records: list[StageRecord] = []
        for task_id, agent in self.stages.open_pairs():
            records.extend(self.on_task_end(task_id, agent))
        return records

    def _close(self, conn, outcomes: list[StageOutcome]) -> list[StageRecord]:
        if not outcomes:
            return []
        if self.store.dialect == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_CONSOLIDATION_LOCK})")
        records = []
        for outcome in outcomes:
            apply_stage_values(conn, self.store, outcome, self.config.value)
            record = StageRecord(
                run_id=outcome.run_id,
                task_id=outcome.task_id,
                agent=outcome.agent,
                stage=outcome.stage,
                score=outcome.score,
                retrieved=len(outcome.retrieved),
                adopted=len(outcome.adopted),
            )
            records.append(self.store.stages.add(conn, record))
            self.consolidator.fade(conn, set(outcome.adopted))
        self.consolidator.rebuild(conn)
        return records
