"""Attempts: the nodes of the experience graph, with their parent edges."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kernelkiln.store import schema
from kernelkiln.store.records import Attempt, Case
from kernelkiln.store.rows import from_row, insert_ignore, to_row

_t = schema.attempts


class Attempts:
    """Evaluated candidates."""

    def add(self, conn: Connection, attempt: Attempt) -> Attempt:
        """Insert ``attempt`` (ignored if its id already exists, so replays are harmless)."""
        insert_ignore(conn, _t, [to_row(attempt, _t)])
        return attempt

    def get(self, conn: Connection, attempt_id: str) -> Attempt | None:
        """The attempt with ``attempt_id``, or None."""
        row = conn.execute(sa.select(_t).where(_t.c.id == attempt_id)).first()
        return from_row(Attempt, row) if row else None

    def for_task(self, conn: Connection, task_id: str) -> list[Attempt]:
        """Every attempt on ``task_id``, oldest first."""
        rows = conn.execute(sa.select(_t).where(_t.c.task_id == task_id).order_by(_t.c.created_at, _t.c.id))
        return [from_row(Attempt, r) for r in rows]

    def for_run(self, conn: Connection, run_id: str) -> list[Attempt]:
        """Every attempt of ``run_id``, oldest first."""
        rows = conn.execute(sa.select(_t).where(_t.c.run_id == run_id).order_by(_t.c.created_at, _t.c.id))
        return [from_row(Attempt, r) for r in rows]

    def get_many(self, conn: Connection, ids: list[str]) -> dict[str, Attempt]:
        """Attempts by id (missing ids are absent)."""
        if not ids:
            return {}
        rows = conn.execute(sa.select(_t).where(_t.c.id.in_(ids)))
        return {r.id: from_row(Attempt, r) for r in rows}

    def all(self, conn: Connection) -> list[Attempt]:
        """Every attempt, oldest first."""
        return [from_row(Attempt, r) for r in conn.execute(sa.select(_t).order_by(_t.c.created_at, _t.c.id))]

    def count(self, conn: Connection) -> int:
        """How many attempts the store holds."""
        return conn.execute(sa.select(sa.func.count()).select_from(_t)).scalar_one()

    def graph_nodes(self, conn: Connection, task_id: str) -> list[GraphNode]:
        """The task's attempts without their journal, case and code: enough to score the graph."""
        return self._graph_nodes(conn, _t.c.task_id == task_id)

    def graph_nodes_of_tasks(self, conn: Connection, task_ids: list[str]) -> list[GraphNode]:
        """Graph nodes of every attempt of these tasks."""
        return self._graph_nodes(conn, _t.c.task_id.in_(task_ids))

    def task_sizes(self, conn: Connection, attempt_ids: list[str]) -> dict[str, int]:
        """Attempt count of every task one of ``attempt_ids`` belongs to (attempts are append-only,
        so the count versions a task's graph)."""
        tasks = sa.select(_t.c.task_id).where(_t.c.id.in_(attempt_ids)).distinct()
        query = (
            sa.select(_t.c.task_id, sa.func.count())
            .where(_t.c.task_id.in_(tasks.scalar_subquery()))
            .group_by(_t.c.task_id)
        )
        return {task: int(n) for task, n in conn.execute(query)}

    def outcomes(self, conn: Connection, task_ids: list[str]) -> list[Outcome]:
        """What the attempts of these tasks were and how they fared, without their code, oldest first."""
        if not task_ids:
            return []
        columns = [_t.c.id, _t.c.task_id, _t.c.run_id, _t.c.verdict, _t.c.speedup, _t.c.case]
        rows = conn.execute(
            sa.select(*columns).where(_t.c.task_id.in_(sorted(set(task_ids)))).order_by(_t.c.created_at, _t.c.id)
        )
        return [
            Outcome(r.id, r.task_id, r.run_id, r.verdict, r.speedup, Case.model_validate_json(r.case)) for r in rows
        ]

    def _graph_nodes(self, conn: Connection, condition: sa.ColumnElement[bool]) -> list[GraphNode]:
        columns = [
            _t.c.id,
            _t.c.task_id,
            _t.c.parent_id,
            _t.c.verdict,
            _t.c.speedup,
            _t.c.time_ms,
            _t.c.created_at,
            _t.c.agent,
            _t.c.lens,
            _t.c.summary,
        ]
        return [GraphNode(*r) for r in conn.execute(sa.select(*columns).where(condition))]


@dataclass(frozen=True, slots=True)
class GraphNode:
    """The part of an attempt the experience graph needs (cheap: built on every retrieval)."""

    id: str
    task_id: str
    parent_id: str | None
    verdict: str
    speedup: float | None
    time_ms: float | None
    created_at: float
    agent: str = ""
    lens: str | None = None
    summary: str = ""

    @property
    def correct(self) -> bool:
        """Whether the guard found the candidate correct."""
        return self.verdict != "REJECT"


@dataclass(frozen=True, slots=True)
class Outcome:
    """An attempt's decision (its case: move, knob settings, signature) and verdict, without its code."""

    id: str
    task_id: str
    run_id: str | None
    verdict: str
    speedup: float | None
    case: Case
