"""Signatures: the (exact key, task) pairs tasks were optimized under, for exact reuse and transfer."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kernelkiln.store import schema
from kernelkiln.store.records import Signature
from kernelkiln.store.rows import from_row, insert_ignore, to_row

_t = schema.signatures


class Signatures:
    """Which tasks ran under which signature."""

    def add(self, conn: Connection, signature: Signature) -> Signature:
        """Record ``signature`` (once per exact key and task)."""
        insert_ignore(conn, _t, [to_row(signature, _t)])
        return signature

    def on_machine(self, conn: Connection, platform: str, machine: str) -> list[Signature]:
        """Every signature recorded for ``platform`` on ``machine``, oldest first ([] in a store before schema 4)."""
        if not sa.inspect(conn).has_table(_t.name):
            return []
        rows = conn.execute(
            sa.select(_t)
            .where(_t.c.platform == platform, _t.c.machine == machine)
            .order_by(_t.c.created_at, _t.c.task_id)
        )
        return [from_row(Signature, r) for r in rows]

    def all(self, conn: Connection) -> list[Signature]:
        """Every signature, oldest first ([] in a store before schema 4)."""
        if not sa.inspect(conn).has_table(_t.name):
            return []
        return [from_row(Signature, r) for r in conn.execute(sa.select(_t).order_by(_t.c.created_at, _t.c.task_id))]

    def exists(self, conn: Connection, signature: Signature) -> bool:
        """Whether this (exact key, task) pair is recorded."""
        query = sa.select(_t.c.exact).where(_t.c.exact == signature.exact, _t.c.task_id == signature.task_id)
        return conn.execute(query).first() is not None
