from kernelkiln.store.records import (
    Adoption,
    Attempt,
    BoardEntry,
    Experience,
    Measurement,
    Rule,
    Run,
    StageRecord,
    TaskRecord,
)
from kernelkiln.store.schema import SCHEMA_VERSION


def test_new_store_is_at_the_current_schema(store):
    assert store.schema_version() == SCHEMA_VERSION
    assert store.integrity_errors() == []


def test_every_record_kind_round_trips(store):
    run = Run(note="first", config={"agents": 2})
    task = TaskRecord(id="row_sum", op_family="reduction", platform="cpu", meta={"flops": 1})
    att = Attempt(
        task_id="row_sum",
        run_id=run.id,
        verdict="KEEP",
        speedup=1.5,
        time_ms=0.5,
        journal="# tiled",
        case={"op_family": "reduction"},
        code="class ModelNew: ...",
        tokens_in=10,
        tokens_out=20,
        measurements=[Measurement(workload="n=1024", t_ref_ms=0.75, t_cand_ms=0.5, speedup=1.5)],
    )
    exp = Experience(text="use 4 accumulators", platform="cpu", op_family="reduction", conditions=["cols>64"])
    with store.write() as conn:
        store.runs.add(conn, run)
        store.tasks.upsert(conn, task)
        store.attempts.add(conn, att)
        store.experiences.add(conn, exp)
        store.adoptions.add_many(
            conn, [Adoption(attempt_id=att.id, experience_id=exp.id, task_id="row_sum", adopted=True, why="fits")]
        )
        stage = store.stages.add(conn, StageRecord(task_id="row_sum", stage="correctness", score=1.0))
        store.rules.upsert(conn, Rule(id=exp.id, text="4 accumulators", tokens=3))
        entry = store.board.post(conn, BoardEntry(task_id="row_sum", kind="win", summary="acc x4"), horizon=16)
    with store.read() as conn:
        assert store.runs.get(conn, run.id) == run
        assert store.tasks.get(conn, "row_sum") == task
        assert store.attempts.get(conn, att.id) == att
        assert store.experiences.get(conn, exp.id) == exp
        assert store.adoptions.for_attempt(conn, att.id)[0].why == "fits"
        assert store.stages.all(conn) == [stage]
        assert store.rules.get(conn, exp.id).text == "4 accumulators"
        assert store.board.for_task(conn, "row_sum") == [entry]


def test_adding_twice_is_harmless(store):
    att = Attempt(task_id="t", verdict="REJECT")
    exp = Experience(text="x")
    adoption = Adoption(attempt_id=att.id, experience_id=exp.id, task_id="t", adopted=False)
    for _ in range(2):
        with store.write() as conn:
            store.attempts.add(conn, att)
            store.experiences.add(conn, exp)
            store.adoptions.add_many(conn, [adoption, adoption])
    with store.read() as conn:
        assert store.attempts.count(conn) == 1
        assert store.experiences.count(conn) == 1
        assert len(store.adoptions.all(conn)) == 1


def test_failed_transaction_leaves_nothing(store):
    try:
        with store.write() as conn:
            store.experiences.add(conn, Experience(text="half"))
            raise RuntimeError("crash mid-write")
    except RuntimeError:
        pass
    with store.read() as conn:
        assert store.experiences.count(conn) == 0


def test_board_keeps_the_latest_horizon_per_task(store):
    with store.write() as conn:
        for i in range(5):
            store.board.post(conn, BoardEntry(task_id="a", kind="trap", summary=f"a{i}"), horizon=3)
        store.board.post(conn, BoardEntry(task_id="b", kind="win", summary="b0"), horizon=3)
    with store.read() as conn:
        assert [e.summary for e in store.board.for_task(conn, "a")] == ["a2", "a3", "a4"]
        assert [e.summary for e in store.board.for_task(conn, "b")] == ["b0"]


def test_distinct_tasks_counts_adopting_tasks_only(store):
    rows = [
        Adoption(attempt_id="a1", experience_id="e", task_id="t1", adopted=True),
        Adoption(attempt_id="a2", experience_id="e", task_id="t1", adopted=True),
        Adoption(attempt_id="a3", experience_id="e", task_id="t2", adopted=True),
        Adoption(attempt_id="a4", experience_id="e", task_id="t3", adopted=False),
    ]
    with store.write() as conn:
        store.adoptions.add_many(conn, rows)
        assert store.adoptions.distinct_tasks(conn, ["e"]) == {"e": 2}


def test_consolidation_candidates_need_positive_value_enough_adoptions_and_tasks(store):
    good = Experience(id="e-good", text="x", q=0.1, adoptions=3, distinct_tasks=3)
    misses = [
        good.model_copy(update={"id": f"e-{field}", **change})
        for field, change in (
            ("no-value", {"q": 0.0}),
            ("few-adoptions", {"adoptions": 2}),
            ("few-tasks", {"distinct_tasks": 2}),
            ("knowledge", {"kind": "knowledge"}),
        )
    ]
    with store.write() as conn:
        store.experiences.add_many(conn, [good, *misses])
    with store.read() as conn:
        assert [e.id for e in store.experiences.consolidation_candidates(conn, 3, 3)] == ["e-good"]
        assert len(store.experiences.consolidation_candidates(conn, 2, 2)) == 3  # the fewer ones join


def test_integrity_check_notices_an_index_out_of_step(sqlite_store):
    # SQLite only: PostgreSQL's index is a generated column, it cannot fall out of step
    with sqlite_store.write() as conn:
        sqlite_store.experiences.add(conn, Experience(text="indexed"))
        conn.exec_driver_sql("DELETE FROM experiences_fts")
    assert any("out of step" in p for p in sqlite_store.integrity_errors())
