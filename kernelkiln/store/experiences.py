"""Experiences (and knowledge sections): text, tags, value Q and its counters."""

from __future__ import annotations

import builtins
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kernelkiln.store import schema
from kernelkiln.store.records import Experience
from kernelkiln.store.rows import from_row, insert_ignore, to_row

_t = schema.experiences
_COLUMNS = [c for c in _t.c if c.name != "seq"]


class Experiences:
    """Reusable lessons with adoption-traced values."""

    def add(self, conn: Connection, experience: Experience) -> Experience:
        """Insert ``experience`` (ignored if its id already exists)."""
        self.add_many(conn, [experience])
        return experience

    def add_many(self, conn: Connection, experiences: list[Experience]) -> int:
        """Insert those not already stored; returns how many were new."""
        existing = self.existing_ids(conn, [e.id for e in experiences])
        rows = [to_row(e, _t) for e in experiences if e.id not in existing]
        insert_ignore(conn, _t, rows)
        return len(rows)

    def existing_ids(self, conn: Connection, ids: list[str]) -> set[str]:
        """Which of ``ids`` are stored."""
        found: set[str] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            found.update(conn.execute(sa.select(_t.c.id).where(_t.c.id.in_(chunk))).scalars())
        return found

    def get(self, conn: Connection, experience_id: str) -> Experience | None:
        """The experience with ``experience_id``, or None."""
        row = conn.execute(sa.select(*_COLUMNS).where(_t.c.id == experience_id)).first()
        return from_row(Experience, row) if row else None

    def get_many(self, conn: Connection, ids: list[str], *, for_update: bool = False) -> dict[str, Experience]:
        """Experiences by id; ``for_update`` locks their rows until the transaction ends."""
        if not ids:
            return {}
        query = sa.select(*_COLUMNS).where(_t.c.id.in_(sorted(set(ids)))).order_by(_t.c.id)
        if for_update:
            query = query.with_for_update()
        return {r.id: from_row(Experience, r) for r in conn.execute(query)}

    def update(self, conn: Connection, experience_id: str, **values: Any) -> None:
        """Set columns of one experience (and its ``updated_at``)."""
        conn.execute(_t.update().where(_t.c.id == experience_id).values(updated_at=time.time(), **values))

    def list(
        self,
        conn: Connection,
        *,
        kind: str | None = None,
        resident: bool | None = None,
        limit: int | None = None,
    ) -> list[Experience]:
        """Experiences, highest Q first."""
        query = sa.select(*_COLUMNS).order_by(_t.c.q.desc(), _t.c.id)
        if kind is not None:
            query = query.where(_t.c.kind == kind)
        if resident is not None:
            query = query.where(_t.c.resident == resident)
        if limit is not None:
            query = query.limit(limit)
        return [from_row(Experience, r) for r in conn.execute(query)]

    def consolidation_candidates(
        self, conn: Connection, min_adoptions: int, min_tasks: int
    ) -> builtins.list[Experience]:
        """Experiences eligible for residency: Q > 0, enough adoptions over enough tasks."""
        query = sa.select(*_COLUMNS).where(
            _t.c.kind == "experience",
            _t.c.q > 0,
            _t.c.adoptions >= min_adoptions,
            _t.c.distinct_tasks >= min_tasks,
        )
        return [from_row(Experience, r) for r in conn.execute(query)]

    def count(self, conn: Connection, kind: str | None = None) -> int:
        """How many experiences (of ``kind``) the store holds."""
        query = sa.select(sa.func.count()).select_from(_t)
        if kind is not None:
            query = query.where(_t.c.kind == kind)
        return conn.execute(query).scalar_one()

    def delete(self, conn: Connection, ids: builtins.list[str]) -> int:
        """Delete experiences by id; returns how many went."""
        if not ids:
            return 0
        return conn.execute(_t.delete().where(_t.c.id.in_(ids))).rowcount
