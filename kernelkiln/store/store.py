"""The store: one database behind a URL, its transactions and its record collections."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import OperationalError

from kernelkiln.errors import UserError
from kernelkiln.store.adoptions import Adoptions
from kernelkiln.store.attempts import Attempts
from kernelkiln.store.board import BoardEntries
from kernelkiln.store.config import StoreConfig
from kernelkiln.store.engine import WRITE_OPTION, create_store_engine
from kernelkiln.store.experiences import Experiences
from kernelkiln.store.migrations import current_version, migrate
from kernelkiln.store.rules import Rules
from kernelkiln.store.runs import Runs, Tasks
from kernelkiln.store.schema import SCHEMA_VERSION
from kernelkiln.store.signatures import Signatures
from kernelkiln.store.stages import Stages
from kernelkiln.store.url import resolve_store_url


class Store:
    """Memory's persistence. Work inside ``read()`` or ``write()`` transactions::

    with store.write() as conn:
        store.attempts.add(conn, attempt)
    """

    def __init__(self, engine: Engine, url: URL | None = None) -> None:
        """``url``: the store's URL as given (a read-only SQLite engine's own URL names the file differently)."""
        self.engine = engine
        self._url = url or engine.url
        self.runs = Runs()
        self.tasks = Tasks()
        self.attempts = Attempts()
        self.experiences = Experiences()
        self.adoptions = Adoptions()
        self.stages = Stages()
        self.rules = Rules()
        self.board = BoardEntries()
        self.signatures = Signatures()

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    @property
    def url(self) -> str:
        """The store's URL as a user writes it (no driver name), password hidden."""
        url = self._url
        return url.set(drivername=url.get_backend_name()).render_as_string(hide_password=True)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A transaction with a consistent snapshot, for reading."""
        with self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: all or nothing, serialized with other writers' conflicting updates."""
        with self.engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                yield conn

    def schema_version(self) -> int:
        """The schema version the database is at."""
        with self.read() as conn:
            return current_version(conn)

    def integrity_errors(self) -> list[str]:
        """Problems found by the database's own consistency check (empty when sound)."""
        with self.read() as conn:
            if self.dialect != "sqlite":
                return []
            problems = [r[0] for r in conn.exec_driver_sql("PRAGMA integrity_check") if r[0] != "ok"]
            try:
                conn.exec_driver_sql("INSERT INTO experiences_fts(experiences_fts, rank) VALUES ('integrity-check', 1)")
            except OperationalError as exc:
                problems.append(f"full-text index: {exc.orig}")
            unindexed = conn.exec_driver_sql(
                "SELECT count(*) FROM experiences e LEFT JOIN experiences_fts f ON f.rowid = e.seq"
                " WHERE f.rowid IS NULL"
            ).scalar_one()
            indexed = conn.exec_driver_sql("SELECT count(*) FROM experiences_fts").scalar_one()
            stored = conn.exec_driver_sql("SELECT count(*) FROM experiences").scalar_one()
            if unindexed or indexed != stored:
                problems.append(
                    f"full-text index out of step: {stored} experiences, {indexed} indexed, {unindexed} missing"
                )
            return problems

    def close(self) -> None:
        """Release the database connections."""
        self.engine.dispose()


def open_store(
    url: str | None = None, config: StoreConfig | None = None, *, upgrade: bool = True, readonly: bool = False
) -> Store:
    """Open (and create or migrate, if ``upgrade``) the store at ``url``.

    ``url`` defaults to ``config.url``, then ``$KILN_STORE``, then the user's data directory.
    ``readonly``: opened for reading only (never created nor migrated; every write fails), and it
    must hold a kernelkiln store. Raises UserError for a bad URL or an unreachable database.
    """
    config = config or StoreConfig()
    resolved = resolve_store_url(url or config.url)
    if readonly and resolved.get_backend_name() == "sqlite" and not Path(cast(str, resolved.database)).is_file():
        raise UserError(f"cannot lend store sqlite:///{resolved.database}: no such file")
    engine = create_store_engine(resolved, config.busy_timeout_s, readonly)
    try:
        if upgrade and not readonly:
            migrate(engine)
        else:
            with engine.connect() as conn:
                version = current_version(conn)
            if readonly and not 1 <= version <= SCHEMA_VERSION:
                engine.dispose()
                shown = resolved.render_as_string(hide_password=True)
                raise UserError(
                    f"cannot lend store {shown}: "
                    + (
                        "it is no kernelkiln store"
                        if version < 1
                        else f"its schema version {version} is newer than this kernelkiln's; upgrade kernelkiln"
                    )
                )
    except OperationalError as exc:
        engine.dispose()
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise UserError(f"cannot open store {resolved.render_as_string(hide_password=True)}: {reason}") from None
    return Store(engine, resolved)
