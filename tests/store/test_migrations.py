import json
import time

import pytest
import sqlalchemy as sa

from kernelkiln.errors import UserError
from kernelkiln.store import open_store, resolve_store_url
from kernelkiln.store.engine import create_store_engine
from kernelkiln.store.migrations import current_version, migrate
from kernelkiln.store.records import BoardEntry, RunTask
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
                'INSERT INTO attempts (id, task_id, agent, summary, journal, "case", code, verdict, measurements, '
                "tokens_in, tokens_out, created_at) "
                "VALUES ('a-old', 't', '', 's', '', '{}', '', 'KEEP', '[]', 0, 0, :now)"
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


def test_a_v2_run_and_attempt_load_typed_after_the_v3_migration(store_url):
    """Version 3 moved run state out of Run.config; attempts' case is read into typed fields."""
    engine = create_store_engine(resolve_store_url(store_url), 5.0)
    assert migrate(engine, target=2) == 2
    old_config = {
        "options": {"budget": 5, "agents": 2},
        "out": "/runs/r-old",
        "status": "interrupted",
        "finished": ["t"],
        "tasks": [{"path": "/tasks/t.py", "overrides": {"n": 4}, "id": "t"}],
        "confirmed": {
            "t": {
                "attempt_id": "a-old",
                "verdict": "KEEP",
                "correct": True,
                "speedup": 1.5,
                "reason": "",
                "time_budget_s": 20.0,
                "workloads": {"w0": 1.5},
            }
        },
    }
    old_case = {
        "move": "neighbour",
        "knobs": {"UNROLL": 4},
        "changed": {"UNROLL": 4},
        "objective": "optimization",
        "platform": "cpu",
        "op_family": "softmax",
        "stage": "time",
        "reason": "faster",
        "noise_margin": 0.02,
        "speedup_vs_incumbent": 1.1,
        "diagnostics": [],
        "code_hash": "abc",
        "cost_usd": 0.5,
        "calls": [[10, 5]],
    }
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO runs (id, created_at, note, config) VALUES ('r-old', 1.0, '', :c)"),
            {"c": json.dumps(old_config)},
        )
        conn.execute(
            sa.text("INSERT INTO runs (id, created_at, note, config) VALUES ('r-other', 2.0, '', :c)"),
            {"c": json.dumps({"agents": 2})},
        )
        conn.execute(
            sa.text(
                "INSERT INTO experiences (id, kind, text, summary, platform, op_family, conditions, tags_text, q, "
                "retrievals, adoptions, distinct_tasks, resident, born_stage, created_at, updated_at) VALUES "
                "('e-gemm', 'experience', 'blocking by 64 reuses the cache', 'block 64', 'cpu', 'gemm', '[]', "
                "'cpu gemm', 0.3, 1, 1, 1, :f, 0, 1.0, 1.0)"
            ),
            {"f": False},
        )
        conn.execute(
            sa.text(
                'INSERT INTO attempts (id, task_id, run_id, agent, summary, journal, "case", code, verdict, '
                "measurements, tokens_in, tokens_out, created_at) VALUES ('a-old', 't', 'r-old', 'a1', 's', '', "
                ":case, '', 'KEEP', '[]', 0, 0, 1.0)"
            ),
            {"case": json.dumps(old_case)},
        )
    engine.dispose()
    store = open_store(store_url)
    try:
        with store.read() as conn:
            run = store.runs.get(conn, "r-old")
            other = store.runs.get(conn, "r-other")
            old = store.attempts.get(conn, "a-old")
            renamed = store.experiences.get(conn, "e-gemm")
            found = [e.id for e, _ in search_experiences(conn, "blocking cache", limit=5, op_family="matmul")]
            raw = json.loads(conn.execute(sa.text("SELECT config FROM runs WHERE id = 'r-old'")).scalar_one())
    finally:
        store.close()
    assert raw == {"budget": 5, "agents": 2}  # the stored row itself was rewritten, not only read leniently
    assert run.config == {"budget": 5, "agents": 2}
    assert (run.state.status, run.state.out, run.state.finished) == ("interrupted", "/runs/r-old", ["t"])
    assert run.state.tasks == [RunTask(path="/tasks/t.py", overrides={"n": 4}, id="t")]
    assert run.state.confirmed["t"].speedup == 1.5 and run.state.confirmed["t"].workloads == {"w0": 1.5}
    assert other.config == {"agents": 2} and other.state.status == "unknown"
    assert (old.case.move, old.case.knobs, old.case.code_hash, old.case.cost_usd) == (
        "neighbour",
        {"UNROLL": 4},
        "abc",
        0.5,
    )
    assert old.case.calls == [(10, 5)] and old.case.speedup_vs_incumbent == 1.1
    assert (renamed.op_family, renamed.q) == ("matmul", 0.3) and found == ["e-gemm"]  # one family name for matmul
