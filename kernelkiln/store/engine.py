"""SQLAlchemy engines tuned for several processes writing one store.

SQLite: WAL journal, a busy timeout, and ``BEGIN IMMEDIATE`` for write transactions so
a read-modify-write never has to upgrade its lock half way (the cause of lost updates
and "database is locked" errors). PostgreSQL: writers lock the rows they update
(``SELECT … FOR UPDATE``, ignored by SQLite where the whole database is locked).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine

WRITE_OPTION = "kiln_write"
# Every agent thread of a run reads memory each turn; on a cluster a driver runs dozens of agents.
# SQLAlchemy's default pool (5, and 10 more at peaks) made them queue for a connection.
_POOL = {"pool_size": 32, "max_overflow": 32}


def create_store_engine(url: URL, busy_timeout_s: float, readonly: bool = False) -> Engine:
    """An engine for ``url`` (already resolved by ``resolve_store_url``); ``readonly``: every write fails."""
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url, busy_timeout_s, readonly)
    options = f"-c lock_timeout={int(busy_timeout_s * 1000)}"
    if readonly:
        options += " -c default_transaction_read_only=on"
    return sa.create_engine(url, pool_pre_ping=True, connect_args={"options": options}, **_POOL)


def _sqlite_engine(url: URL, busy_timeout_s: float, readonly: bool) -> Engine:
    args = {"timeout": busy_timeout_s, "check_same_thread": False}
    if readonly:  # SQLite opens the file itself read-only: the database cannot change through this engine
        url = url.set(database=f"file:{url.database}?mode=ro", query={"uri": "true"})
    engine = sa.create_engine(url, connect_args=args, **_POOL)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: object) -> None:
        # Let SQLAlchemy's "begin" event below emit BEGIN itself.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not readonly:
            cursor.execute("PRAGMA journal_mode=WAL")
            # NORMAL is crash-safe in WAL mode (a killed process loses nothing committed).
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = "IMMEDIATE" if conn.get_execution_options().get(WRITE_OPTION) else "DEFERRED"
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine
