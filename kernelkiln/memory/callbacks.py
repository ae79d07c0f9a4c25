"""What runs after each verdict: one typed record, handed to a list of callbacks.

The orchestrator gives every judged attempt, as an ``AttemptResult``, to each
``VerdictCallback`` in turn (in the spirit of TVM MetaSchedule's ``MeasureCallback``).
Memory's callback records all the verdict teaches in one transaction: the attempt (a
graph node) with its adoption records, the board conclusions it implies, the stages it
closes (their ATU feedback applied to Q, the resident rules faded and rebuilt) and, for a
new best derived from a parent, the distilled lesson. A crash leaves all of it or none.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from typing import Protocol

from pydantic import Field
from sqlalchemy.engine import Connection

from kernelkiln.memory import distill
from kernelkiln.memory.board import Board, entry_for_attempt
from kernelkiln.memory.config import MemoryConfig
from kernelkiln.memory.rules import Consolidator
from kernelkiln.memory.stages import StageOutcome, StageTracker
from kernelkiln.memory.value import apply_stage_values
from kernelkiln.store.records import Adoption, Attempt, Experience, Record, Signature, StageRecord, TaskRecord
from kernelkiln.store.store import Store

_CONSOLIDATION_LOCK = 0x6B6C6E31  # serializes stage closing across PostgreSQL writers


class AttemptResult(Record):
    """One judged attempt: what every callback after the verdict is given."""

    attempt: Attempt
    task: TaskRecord  # the task's tags (op family, platform), refreshed with the attempt
    adoptions: list[Adoption] = Field(default_factory=list)  # made by its agent before evaluation
    parent: Attempt | None = None  # the attempt it was derived from, when the caller holds it
    incumbent: Attempt | None = None  # the task's best once this verdict is counted
    signature: Signature | None = None  # what the task is matched on (exact reuse, transfer)


class VerdictCallback(Protocol):
    """Called with each judged attempt, in the order the callbacks were given."""

    def after_verdict(self, result: AttemptResult) -> object:
        """React to one verdict (an exception stops the run: the callback after it is not called);
        what it returns is not used."""


def add_lesson(store: Store, conn: Connection, lesson: Experience) -> Experience:
    """Store a new experience on ``conn``; its cold frequency counts stages from now on."""
    born = lesson.model_copy(update={"born_stage": store.stages.last_id(conn)})
    store.experiences.add(conn, born)
    return born


class MemoryCallbacks:
    """Memory's part after each verdict, and at the end of a task's work.

    ``learn=False`` (read-only memory): the run's own records are kept (attempts, adoptions, the
    task's signature and board) but no stage is scored, no value, rule or lesson is written.
    """

    def __init__(
        self,
        store: Store,
        config: MemoryConfig | None = None,
        consolidator: Consolidator | None = None,
        learn: bool = True,
        board: Board | None = None,
    ):
        """``board``: the board verdicts post to (a Memory hands in its own; default: one over ``store``)."""
        self.store = store
        self.learn = learn
        self.config = config or MemoryConfig()
        self.stages = StageTracker(self.config.value)
        self.board = board or Board(store, self.config.board)
        self.consolidator = consolidator or Consolidator(store, self.config.rules)
        self._lock = threading.Lock()  # the stage tracker is shared by the agents' threads

    def after_verdict(self, result: AttemptResult) -> list[StageRecord]:
        """Record one judged attempt and all it implies; returns the stages it closed (with their scores)."""
        with self._lock:
            snapshot = copy.deepcopy(self.stages)
            closed = self.stages.observe(result.attempt, result.adoptions)
            try:
                return self._record(result, closed)
            except BaseException:
                self.stages = snapshot  # nothing was stored: forget it, so a retry counts it once
                raise

    def _record(self, result: AttemptResult, closed: list[StageOutcome]) -> list[StageRecord]:
        store, attempt = self.store, result.attempt
        with store.write() as conn:
            store.tasks.upsert(conn, result.task)
            store.attempts.add(conn, attempt)
            store.adoptions.add_many(conn, result.adoptions)
            if result.signature is not None:
                store.signatures.add(conn, result.signature)
            if self.board.config.auto_post and (entry := entry_for_attempt(self.board, attempt)):
                store.board.post(conn, entry, self.board.config.horizon)
            if not self.learn:
                return []
            records = self._close(conn, closed)
            parent = result.parent
            if parent is None and attempt.parent_id is not None and attempt.verdict == "KEEP":
                parent = store.attempts.get(conn, attempt.parent_id)
            lesson = distill.win(attempt, parent, result.task.op_family, result.task.platform or "cpu")
            if lesson is not None:
                add_lesson(store, conn, lesson)
            return records

    def replay(self, attempts: Sequence[tuple[Attempt, list[Adoption]]], ended: Sequence[StageRecord] = ()) -> None:
        """Rebuild the open stages from a run's stored attempts (resuming it); stores nothing.

        ``ended``: the stage records the run stored for those tasks. A (task, agent) with more
        of them than its attempts close had its work ended already (``on_task_end``), so its
        stage stays closed instead of being scored a second time.
        """
        with self._lock:
            closes: dict[tuple[str, str], int] = {}
            for attempt, adoptions in attempts:
                key = (attempt.task_id, attempt.agent)
                closes[key] = closes.get(key, 0) + len(self.stages.observe(attempt, adoptions))
            stored: dict[tuple[str, str], int] = {}
            for record in ended:
                stored[(record.task_id, record.agent)] = stored.get((record.task_id, record.agent), 0) + 1
            for key, count in stored.items():
                if count > closes.get(key, 0):
                    self.stages.end(*key)

    def on_task_end(self, task_id: str, agents: Sequence[str], lesson: Experience | None = None) -> list[StageRecord]:
        """Close the open stages of the task's ``agents`` and store its ``lesson``, in one transaction."""
        with self._lock:
            snapshot = copy.deepcopy(self.stages)
            closed = [outcome for agent in agents for outcome in self.stages.end(task_id, agent)]
            if not self.learn or (not closed and lesson is None):
                return []
            try:
                with self.store.write() as conn:
                    records = self._close(conn, closed)
                    if lesson is not None:
                        add_lesson(self.store, conn, lesson)
                    return records
            except BaseException:
                self.stages = snapshot
                raise

    def _close(self, conn: Connection, outcomes: list[StageOutcome]) -> list[StageRecord]:
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
