import pytest

from kernelkiln.memory import Memory, MemoryConfig
from kernelkiln.memory.config import BoardConfig
from kernelkiln.store.records import Experience, TaskRecord
from kernelkiln.testing.memory_fakes import attempt, result


def _memory(store, **config):
    memory = Memory(store, MemoryConfig(**config))
    for eid in ("a", "b", "c", "x"):
        memory.add_experience(Experience(id=eid, text=f"lesson {eid}"))
    return memory


def _q(store, *ids):
    with store.read() as conn:
        found = store.experiences.get_many(conn, list(ids))
    return [found[i].q for i in ids]


def test_worked_example_updates_q_in_the_store(store):
    memory = _memory(store)
    task = TaskRecord(id="t1", platform="cpu")
    first = attempt("t1", verdict="KEEP", time_ms=1.0)
    stages = memory.callbacks.after_verdict(result(first, task=task))
    assert [(s.stage, s.score) for s in stages] == [("correctness", 1.0)]
    second = attempt("t1", verdict="KEEP", time_ms=0.6, parent=first)
    assert memory.callbacks.after_verdict(result(second, adopted=["a", "b"], unadopted=["c"], task=task)) == []
    (closed,) = memory.callbacks.on_task_end("t1", [""])
    assert closed.stage == "optimization" and closed.score == pytest.approx(0.4)
    assert (closed.retrieved, closed.adopted) == (3, 2)
    # n = 1 so α = 1: Q takes the feedback itself.
    assert _q(store, "a", "b", "c", "x") == pytest.approx([0.2, 0.2, -0.2, 0.0])
    with store.read() as conn:
        a = store.experiences.get(conn, "a")
        assert (a.retrievals, a.adoptions, a.distinct_tasks) == (1, 1, 1)
        assert store.experiences.get(conn, "c").adoptions == 0
        assert [n.id for n in store.attempts.for_task(conn, "t1")] == [first.id, second.id]
        assert len(store.adoptions.for_attempt(conn, second.id)) == 3
        assert store.tasks.get(conn, "t1").platform == "cpu"
        assert [s.score for s in store.stages.all(conn)] == pytest.approx([1.0, 0.4])


def test_uniform_credit_gives_unadopted_experiences_the_stage_score(store):
    memory = _memory(store, value={"credit": "uniform"})
    first = attempt("t1", verdict="KEEP", time_ms=1.0)
    memory.callbacks.after_verdict(result(first))
    second = attempt("t1", verdict="KEEP", time_ms=0.6, parent=first)
    memory.callbacks.after_verdict(result(second, adopted=["a"], unadopted=["c"]))
    memory.callbacks.on_task_end("t1", [""])
    assert _q(store, "a", "c", "x") == pytest.approx([0.4, 0.4, 0.0])


def test_second_stage_averages_with_alpha_one_half(store):
    memory = _memory(store)
    memory.callbacks.after_verdict(result(attempt("t1", verdict="REJECT"), adopted=["a"]))
    memory.callbacks.after_verdict(result(attempt("t1", verdict="KEEP", time_ms=1.0), adopted=["a"]))
    # correctness stage: s = 1, a is the only adopted → f = 1, n = 1 → Q = 1
    assert _q(store, "a") == pytest.approx([1.0])
    memory.callbacks.after_verdict(result(attempt("t1", verdict="REVERT", time_ms=2.0), unadopted=["a"]))
    memory.callbacks.on_task_end("t1", [""])
    # optimization stage: unadopted → f = −0.2, n = 2 → Q = 0.5·1 + 0.5·(−0.2) = 0.4
    assert _q(store, "a") == pytest.approx([0.4])


def test_board_gets_wins_and_traps(store):
    memory = _memory(store)
    for judged in (
        attempt("t1", verdict="REJECT", summary="avx512 path", error_class="build"),
        attempt("t1", verdict="KEEP", speedup=1.8, time_ms=1.0, summary="4 accumulators"),
        attempt("t1", verdict="ACCEPT", speedup=1.7, time_ms=1.1),
    ):
        memory.callbacks.after_verdict(result(judged))
    assert [(e.kind, e.summary) for e in memory.board.read("t1")] == [
        ("trap", "avx512 path [build]"),
        ("win", "4 accumulators (1.80x)"),
    ]
    quiet = Memory(store, MemoryConfig(board=BoardConfig(auto_post=False)))
    quiet.callbacks.after_verdict(result(attempt("t2", verdict="KEEP")))
    assert quiet.board.read("t2") == []


def test_the_memory_and_its_callbacks_share_one_board_also_when_reconfigured(store):
    memory = _memory(store)
    assert memory.callbacks.board is memory.board
    narrow = memory.configured(MemoryConfig(board=BoardConfig(horizon=1)))
    assert narrow is not memory and narrow.callbacks.board is narrow.board
    assert narrow.board.config.horizon == 1
    for summary in ("first", "second"):
        narrow.callbacks.after_verdict(result(attempt("t1", verdict="KEEP", time_ms=1.0, summary=summary)))
    assert [e.summary for e in narrow.board.read("t1")] == ["second"]  # posted and kept under the one horizon
    assert [e.summary for e in memory.board.read("t1")] == ["second"]


def test_adoption_across_three_tasks_makes_a_resident_rule(store):
    memory = _memory(store)
    for task in ("t1", "t2", "t3"):
        memory.callbacks.after_verdict(
            result(attempt(task, verdict="KEEP", time_ms=1.0), adopted=["x"], unadopted=["c"])
        )
    with store.read() as conn:
        x = store.experiences.get(conn, "x")
        assert (x.adoptions, x.distinct_tasks, x.resident) == (3, 3, True)
        assert store.rules.get(conn, "x").resident
    assert [r.id for r, _ in memory.resident_rules()] == ["x"]
    assert all(h.experience.id != "x" for h in memory.retrieve("lesson"))
    # Used in a later stage: the EMA holds the frequency up.
    before = memory.resident_rules()[0][0].frequency
    memory.callbacks.after_verdict(result(attempt("t4", verdict="KEEP", time_ms=1.0), adopted=["x"]))
    assert memory.resident_rules()[0][0].frequency == pytest.approx(0.9 * before + 0.1)


def test_a_failed_write_is_not_counted_twice(store, monkeypatch):
    memory = _memory(store)
    judged = result(attempt("t1", verdict="KEEP", time_ms=1.0), adopted=["a"])
    real_add = store.attempts.add
    monkeypatch.setattr(store.attempts, "add", lambda conn, a: (_ for _ in ()).throw(RuntimeError("disk full")))
    with pytest.raises(RuntimeError):
        memory.callbacks.after_verdict(judged)
    monkeypatch.setattr(store.attempts, "add", real_add)
    assert [s.stage for s in memory.callbacks.after_verdict(judged)] == ["correctness"]
    with store.read() as conn:
        assert store.experiences.get(conn, "a").retrievals == 1


def test_task_end_closes_the_open_stage_of_every_agent_once(store):
    memory = _memory(store)
    memory.callbacks.after_verdict(result(attempt("t1", verdict="REJECT", agent="a1")))
    memory.callbacks.after_verdict(result(attempt("t1", verdict="KEEP", time_ms=1.0, agent="a2")))
    closed = memory.callbacks.on_task_end("t1", ["a1", "a2"])
    assert sorted((s.agent, s.stage, s.score) for s in closed) == [
        ("a1", "correctness", -0.2),
        ("a2", "optimization", -0.2),
    ]
    assert memory.callbacks.on_task_end("t1", ["a1", "a2"]) == []


def test_concurrent_processes_lose_no_value_update(store):
    import multiprocessing

    from kernelkiln.testing.store_writers import close_stages

    Memory(store).add_experience(Experience(id="shared", text="shared lesson"))
    url = store.engine.url.render_as_string(hide_password=False).replace("+psycopg", "").replace("+pysqlite", "")
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        assert pool.starmap(close_stages, [(url, w, 8, "shared") for w in range(3)]) == [8, 8, 8]
    with store.read() as conn:
        shared = store.experiences.get(conn, "shared")
        assert (shared.retrievals, shared.adoptions, shared.distinct_tasks) == (24, 24, 24)
        assert store.stages.count_since(conn, 0) == 24
        assert shared.q == pytest.approx(1.0)  # every stage scored s = 1 with one adopted experience
        assert shared.resident  # ≥ 3 adoptions over ≥ 3 tasks with Q > 0


def test_a_new_best_lands_with_its_adoptions_and_its_lesson_or_not_at_all(store, monkeypatch):
    memory = _memory(store)
    task = TaskRecord(id="t1", op_family="softmax", platform="cpu")
    root = attempt("t1", verdict="KEEP", time_ms=2.0, case={"knobs": {"REPEAT": 2}})
    memory.callbacks.after_verdict(result(root, task=task))
    child = attempt(
        "t1",
        verdict="KEEP",
        speedup=2.0,
        time_ms=1.0,
        parent=root,
        case={"knobs": {"REPEAT": 1}, "changed": {"REPEAT": 1}},
    )
    judged = result(child, adopted=["a"], unadopted=["b"], task=task)  # its parent is read from the store
    real_add = store.experiences.add
    monkeypatch.setattr(store.experiences, "add", lambda conn, e: (_ for _ in ()).throw(RuntimeError("disk full")))
    with pytest.raises(RuntimeError):
        memory.callbacks.after_verdict(judged)
    with store.read() as conn:  # the lesson failed: the attempt and its adoptions were not stored either
        assert store.attempts.get(conn, child.id) is None and store.adoptions.for_attempt(conn, child.id) == []
    monkeypatch.setattr(store.experiences, "add", real_add)
    memory.callbacks.after_verdict(judged)
    with store.read() as conn:
        assert len(store.adoptions.for_attempt(conn, child.id)) == 2
        lessons = [e for e in store.experiences.list(conn, kind="experience") if e.source_attempt_id == child.id]
    assert len(lessons) == 1 and lessons[0].conditions == ["set REPEAT=1"] and "(was REPEAT=2)" in lessons[0].text


def test_an_unused_resident_rule_fades_but_is_not_penalized(store):
    memory = _memory(store)
    for task in ("t1", "t2", "t3"):
        memory.callbacks.after_verdict(result(attempt(task, verdict="KEEP", time_ms=1.0), adopted=["x"]))
    with store.read() as conn:
        before = store.experiences.get(conn, "x")
        frequency = store.rules.get(conn, "x").frequency
    assert before.resident
    memory.callbacks.after_verdict(result(attempt("t4", verdict="KEEP", time_ms=1.0), adopted=["a"], unadopted=["x"]))
    with store.read() as conn:
        after = store.experiences.get(conn, "x")
        assert (after.q, after.retrievals) == (before.q, before.retrievals)
        assert store.rules.get(conn, "x").frequency == pytest.approx(0.9 * frequency)
