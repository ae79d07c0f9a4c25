"""Versioned schema migrations, recorded in the ``kiln_schema`` table.

Each step brings the store from version N-1 to N inside one transaction, so a process
killed during a migration leaves the previous version intact. Steps are frozen once
released: a later change to a table adds a step, it never edits an old one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from kernelkiln.errors import UserError
from kernelkiln.store import schema
from kernelkiln.store.engine import WRITE_OPTION
from kernelkiln.store.records import Experience, Run
from kernelkiln.store.rows import from_row, to_row

_PG_MIGRATION_LOCK = 0x6B696C6E  # "kiln": serializes concurrent migrators on PostgreSQL


# The runs table as version 1 made it: a later column must not appear in a version-1 store.
_V1_RUNS = sa.Table(
    "runs",
    sa.MetaData(),
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("note", sa.Text, nullable=False, default=""),
    sa.Column("config", sa.Text, nullable=False, default="{}"),
)


def _v1_base_tables(conn: Connection) -> None:
    schema.metadata.create_all(conn, tables=[t for t in schema.V1_TABLES if t is not schema.runs])
    _V1_RUNS.create(conn)


# The index keeps its own copy of the searchable text plus the op family ("any" when
# unset) so that the op-family filter prunes inside the index.
_FTS_VALUES = "{r}.seq, {r}.text, {r}.summary, {r}.tags_text, coalesce({r}.op_family, 'any')"
_FTS_INSERT = "INSERT INTO experiences_fts(rowid, text, summary, tags_text, op_tag) "
_SQLITE_FTS = [
    "CREATE VIRTUAL TABLE experiences_fts USING fts5(text, summary, tags_text, op_tag, tokenize='porter unicode61')",
    "CREATE TRIGGER experiences_fts_ai AFTER INSERT ON experiences BEGIN "
    f"{_FTS_INSERT} VALUES ({_FTS_VALUES.format(r='new')}); END",
    "CREATE TRIGGER experiences_fts_ad AFTER DELETE ON experiences BEGIN "
    "DELETE FROM experiences_fts WHERE rowid = old.seq; END",
    "CREATE TRIGGER experiences_fts_au AFTER UPDATE OF text, summary, tags_text, op_family ON experiences BEGIN "
    "DELETE FROM experiences_fts WHERE rowid = old.seq; "
    f"{_FTS_INSERT} VALUES ({_FTS_VALUES.format(r='new')}); END",
    # Index the rows a version-1 store already holds.
    f"{_FTS_INSERT} SELECT {_FTS_VALUES.format(r='experiences')} FROM experiences",
]

_POSTGRES_FTS = [
    "ALTER TABLE experiences ADD COLUMN tsv tsvector GENERATED ALWAYS AS "
    "(to_tsvector('english', text || ' ' || summary || ' ' || tags_text)) STORED",
    "CREATE INDEX ix_experiences_tsv ON experiences USING GIN (tsv)",
]


def _v2_board_and_search(conn: Connection) -> None:
    schema.board.create(conn)
    statements = _SQLITE_FTS if conn.dialect.name == "sqlite" else _POSTGRES_FTS
    for statement in statements:
        conn.exec_driver_sql(statement)


def _v3_run_state_and_matmul(conn: Connection) -> None:
    """Runs get a state column (status, tasks, finished and confirmations move out of the config);
    the op family ``gemm`` (one example's name for matmul) becomes ``matmul``, so its lessons are
    retrieved for matmul tasks (their ids, derived from the family, stay as they were)."""
    conn.exec_driver_sql("ALTER TABLE runs ADD COLUMN state TEXT NOT NULL DEFAULT '{}'")
    for row in conn.execute(sa.select(schema.runs)).all():
        run = from_row(Run, row)  # Run reads the old layout (see Run._split_legacy_layout)
        new = to_row(run, schema.runs)
        conn.execute(
            schema.runs.update().where(schema.runs.c.id == run.id).values(config=new["config"], state=new["state"])
        )
    experiences = schema.experiences
    for row in conn.execute(sa.select(experiences).where(experiences.c.op_family == "gemm")).all():
        renamed = from_row(Experience, row).model_copy(update={"op_family": "matmul"})
        conn.execute(
            experiences.update()
            .where(experiences.c.id == renamed.id)
            .values(op_family="matmul", tags_text=renamed.tags_text)
        )
    conn.execute(schema.tasks.update().where(schema.tasks.c.op_family == "gemm").values(op_family="matmul"))


def _v4_signatures(conn: Connection) -> None:
    """Tasks' signatures, for exact reuse and transfer (attempts stored before have none: they stay out of both)."""
    schema.signatures.create(conn)


MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    1: _v1_base_tables,
    2: _v2_board_and_search,
    3: _v3_run_state_and_matmul,
    4: _v4_signatures,
}
assert max(MIGRATIONS) == schema.SCHEMA_VERSION


def current_version(conn: Connection) -> int:
    """The store's schema version (0 for an empty database)."""
    if not sa.inspect(conn).has_table(schema.schema_version.name):
        return 0
    return conn.execute(sa.select(sa.func.max(schema.schema_version.c.version))).scalar() or 0


def migrate(engine: Engine, target: int = schema.SCHEMA_VERSION) -> int:
    """Apply the missing steps up to ``target``; returns the version reached.

    Raises UserError if the store was written by a newer kernelkiln.
    """
    while True:
        with engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
                version = current_version(conn)
                if version > schema.SCHEMA_VERSION:
                    raise UserError(
                        f"store schema version {version} is newer than this kernelkiln's "
                        f"({schema.SCHEMA_VERSION}); upgrade kernelkiln"
                    )
                if version >= target:
                    return version
                if version == 0:
                    schema.schema_version.create(conn, checkfirst=True)
                MIGRATIONS[version + 1](conn)
                conn.execute(schema.schema_version.insert().values(version=version + 1, applied_at=time.time()))
