"""Adoption records: for each attempt, which retrieved experiences it adopted and why."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kernelkiln.store import schema
from kernelkiln.store.records import Adoption
from kernelkiln.store.rows import from_row, insert_ignore, to_row

_t = schema.adoptions


class Adoptions:
    """attempt × experience records."""

    def add_many(self, conn: Connection, adoptions: list[Adoption]) -> int:
        """Insert records not already stored (same attempt and experience); returns how many."""
        if not adoptions:
            return 0
        attempt_ids = sorted({a.attempt_id for a in adoptions})
        existing = {
            (r.attempt_id, r.experience_id)
            for r in conn.execute(
                sa.select(_t.c.attempt_id, _t.c.experience_id).where(_t.c.attempt_id.in_(attempt_ids))
            )
        }
        rows, seen = [], set(existing)
        for adoption in adoptions:
            key = (adoption.attempt_id, adoption.experience_id)
            if key not in seen:
                seen.add(key)
                rows.append(to_row(adoption, _t))
        insert_ignore(conn, _t, rows)
        return len(rows)

    def for_attempt(self, conn: Connection, attempt_id: str) -> list[Adoption]:
        """The records of one attempt."""
        rows = conn.execute(sa.select(_t).where(_t.c.attempt_id == attempt_id).order_by(_t.c.id))
        return [from_row(Adoption, r) for r in rows]

    def for_experience(self, conn: Connection, experience_id: str) -> list[Adoption]:
        """The records about one experience, oldest first."""
        rows = conn.execute(sa.select(_t).where(_t.c.experience_id == experience_id).order_by(_t.c.id))
        return [from_row(Adoption, r) for r in rows]

    def distinct_tasks(self, conn: Connection, experience_ids: list[str]) -> dict[str, int]:
        """For each experience, over how many distinct tasks it was adopted."""
        if not experience_ids:
            return {}
        query = (
            sa.select(_t.c.experience_id, sa.func.count(sa.distinct(_t.c.task_id)))
            .where(_t.c.experience_id.in_(experience_ids), _t.c.adopted == sa.true())
            .group_by(_t.c.experience_id)
        )
        return {eid: n for eid, n in conn.execute(query)}

    def all(self, conn: Connection) -> list[Adoption]:
        """Every record, oldest first."""
        return [from_row(Adoption, r) for r in conn.execute(sa.select(_t).order_by(_t.c.id))]

    def delete_for_experiences(self, conn: Connection, experience_ids: list[str]) -> int:
        """Delete the records about these experiences."""
        if not experience_ids:
            return 0
        return conn.execute(_t.delete().where(_t.c.experience_id.in_(experience_ids))).rowcount
