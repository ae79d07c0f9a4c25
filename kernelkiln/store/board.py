"""The shared board's storage: entries per task, trimmed to a retention horizon."""

from __future__ import annotations

import zlib

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kernelkiln.store import schema
from kernelkiln.store.records import BoardEntry
from kernelkiln.store.rows import from_row, inserted_id, to_row

_t = schema.board
_BOARD_LOCK = 0x626F6172  # "boar": the namespace of per-task board locks on PostgreSQL


class BoardEntries:
    """Wins and traps, newest last."""

    def post(self, conn: Connection, entry: BoardEntry, horizon: int) -> BoardEntry:
        """Add ``entry`` and drop its task's entries beyond the last ``horizon``, in one transaction."""
        if conn.dialect.name == "postgresql":
            # One writer per task at a time, so concurrent trims cannot deadlock on each other's rows.
            key = zlib.crc32(entry.task_id.encode()) - 2**31
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:ns, :key)"), {"ns": _BOARD_LOCK, "key": key})
        result = conn.execute(_t.insert().values(to_row(entry, _t, skip=("id",))))
        self.trim(conn, entry.task_id, horizon)
        return entry.model_copy(update={"id": inserted_id(result)})

    def trim(self, conn: Connection, task_id: str, horizon: int) -> int:
        """Delete the task's entries older than its last ``horizon``; returns how many."""
        keep = sa.select(_t.c.id).where(_t.c.task_id == task_id).order_by(_t.c.id.desc()).limit(horizon)
        cutoff = conn.execute(sa.select(sa.func.min(keep.subquery().c.id))).scalar()
        if cutoff is None:
            return 0
        return conn.execute(_t.delete().where(_t.c.task_id == task_id, _t.c.id < cutoff)).rowcount

    def for_task(self, conn: Connection, task_id: str, limit: int | None = None) -> list[BoardEntry]:
        """The task's latest entries (at most ``limit``), oldest first."""
        query = sa.select(_t).where(_t.c.task_id == task_id).order_by(_t.c.id.desc())
        if limit is not None:
            query = query.limit(limit)
        return [from_row(BoardEntry, r) for r in reversed(conn.execute(query).all())]

    def task_ids(self, conn: Connection) -> list[str]:
        """Tasks that have entries."""
        return list(conn.execute(sa.select(_t.c.task_id).distinct().order_by(_t.c.task_id)).scalars())

    def all(self, conn: Connection) -> list[BoardEntry]:
        """Every entry, oldest first."""
        return [from_row(BoardEntry, r) for r in conn.execute(sa.select(_t).order_by(_t.c.id))]

    def count(self, conn: Connection) -> int:
        """How many entries the board holds."""
        return conn.execute(sa.select(sa.func.count()).select_from(_t)).scalar_one()
