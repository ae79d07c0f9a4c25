"""Rules: concise resident forms of experiences (same id); never deleted, only evicted."""

from __future__ import annotations

import time

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kernelkiln.store import schema
from kernelkiln.store.records import Rule
from kernelkiln.store.rows import from_row, insert_ignore, to_row

_t = schema.rules


class Rules:
    """Distilled rules and their residency."""

    def upsert(self, conn: Connection, rule: Rule) -> Rule:
        """Insert ``rule`` or overwrite the stored one with the same id."""
        row = to_row(rule, _t)
        insert_ignore(conn, _t, [row])
        row.pop("created_at")
        conn.execute(_t.update().where(_t.c.id == rule.id).values(row))
        return rule

    def get(self, conn: Connection, rule_id: str) -> Rule | None:
        """The rule with ``rule_id``, or None."""
        row = conn.execute(sa.select(_t).where(_t.c.id == rule_id)).first()
        return from_row(Rule, row) if row else None

    def list(self, conn: Connection, *, resident: bool | None = None) -> list[Rule]:
        """Rules (only resident ones, or only evicted ones, if asked)."""
        query = sa.select(_t).order_by(_t.c.id)
        if resident is not None:
            query = query.where(_t.c.resident == resident)
        return [from_row(Rule, r) for r in conn.execute(query)]

    def update(self, conn: Connection, rule_id: str, **values: object) -> None:
        """Set columns of one rule."""
        conn.execute(_t.update().where(_t.c.id == rule_id).values(updated_at=time.time(), **values))
