import time

import pytest
import sqlalchemy as sa

from kernelkiln.errors import UserError
from kernelkiln.store import open_store, resolve_store_url
from kernelkiln.store.engine import create_store_engine
from kernelkiln.store.migrations import current_version, migrate
from kernelkiln.store.records import BoardEntry
from kernelkiln.store.schema import SCHEMA_VERSION
from kernelkiln.store.search import search_experiences


def _v1_store(url):
    """A store as kernelkiln with schema version 1 left it, holding one experience and one attempt."""
    engine = create_store_engine(resolve_store_url(url), 5.0)
    assert migrate(engine, target=1) == 1
    now = time.time()
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO experiences (id, kind, text, summary, conditions, tags_text, q, retrievals, adoptions, "
                "distinct_tasks, resident, born_stage, created_at, updated_at) VALUES "
                "('e-old', 'experience', 'blocking the matmul for cache reuse', 'block it', '[]', 'cpu gemm', "
                "0.4, 3, 2, 2, :f, 0, :now, :now)"
            ),
            {"now": now, "f": False},
        )
        conn.execute(
            sa.text(
                "INSERT INTO attempts (id, task_id, agent, summary, journal, \"case\", code, verdict, measurements, "
                "tokens_in, tokens_out, created_at) VALUES ('a-old', 't', '', 's', '', '{}', '', 'KEEP', '[]', 0, 0, :now)"
            ),
            {"now": now},
        )
    with engine.connect() as conn:
        tables = set(sa.inspect(conn).get_table_names())
    engine.dispose()
    assert "board" not in tables and "experiences" in tables


def test_v1_store_is_migrated_not_broken(store_url):
    _v1_store(store_url)
    store = open_store(store_url)
    try:
        assert store.schema_version() == SCHEMA_VERSION
        with store.read() as conn:
            old = store.experiences.get(conn, "e-old")
            assert (old.q, old.retrievals, old.adoptions) == (0.4, 3, 2)
            assert store.attempts.get(conn, "a-old").verdict == "KEEP"
            # Rows written before full-text search existed are indexed by the migration.
            assert [e.id for e, _ in search_experiences(conn, "matmul cache", limit=5)] == ["e-old"]
        with store.write() as conn:
            store.board.post(conn, BoardEntry(task_id="t", kind="win", summary="works"), horizon=16)
        assert store.integrity_errors() == []
    finally:
        store.close()


def test_opening_twice_migrates_once(store_url):
    open_store(store_url).close()
    store = open_store(store_url)
    with store.read() as conn:
        versions = conn.execute(sa.text("SELECT version FROM kiln_schema ORDER BY version")).scalars().all()
    store.close()
    assert versions == list(range(1, SCHEMA_VERSION + 1))


def test_a_newer_store_is_refused(store_url):
    store = open_store(store_url)
    with store.write() as conn:
        conn.execute(sa.text("INSERT INTO kiln_schema (version, applied_at) VALUES (:v, 0)"), {"v": SCHEMA_VERSION + 1})
    store.close()
    with pytest.raises(UserError, match="newer"):
        open_store(store_url)


def test_empty_database_is_version_zero(store_url):
    engine = create_store_engine(resolve_store_url(store_url), 5.0)
    with engine.connect() as conn:
        assert current_version(conn) == 0
    engine.dispose()
