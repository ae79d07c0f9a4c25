from kernelkiln.memory import Memory
from kernelkiln.store.records import Experience, StageRecord
from kernelkiln.testing.memory_fakes import attempt, result


def test_new_experiences_are_born_at_the_latest_stage(store):
    with store.write() as conn:
        store.stages.add(conn, StageRecord(task_id="t", stage="correctness", score=1))
        store.stages.add(conn, StageRecord(task_id="t", stage="optimization", score=0.1))
    born = Memory(store).add_experience(Experience(text="x"))
    assert born.born_stage == 2


def test_stats_and_graph(store):
    memory = Memory(store)
    memory.seed_knowledge("cpu")
    root = attempt("t1", verdict="KEEP", time_ms=1.0)
    child = attempt("t1", verdict="KEEP", time_ms=0.5, speedup=2.0, parent=root)
    memory.callbacks.after_verdict(result(root))
    memory.callbacks.after_verdict(result(child))
    stats = memory.stats()
    assert stats["attempts"] == 2 and stats["stages"] == 1 and stats["board_entries"] == 2
    assert stats["tasks"] == 1  # tasks are recorded with their first attempt
    assert stats["knowledge_sections"] > 0 and stats["experiences"] == 1  # the lesson of the new best
    assert memory.graph("t1").best_path() == [root.id, child.id]


def test_ranked_attempts_are_the_best_scoring_correct_ones_with_their_code(sqlite_store):
    memory = Memory(sqlite_store)
    root = attempt("t1", verdict="KEEP", speedup=1.0, code="root")
    good = attempt("t1", verdict="KEEP", speedup=3.0, parent=root, code="good")
    bad = attempt("t1", verdict="REJECT", parent=root, code="bad")
    with sqlite_store.write() as conn:
        for a in (root, good, bad):
            sqlite_store.attempts.add(conn, a)
    ranked = memory.ranked_attempts("t1", limit=5)
    assert [a.code for a in ranked] == [a.code for a, _ in memory.graph("t1").ranked() if a.correct]
    assert "bad" not in [a.code for a in ranked] and len(memory.ranked_attempts("t1", limit=1)) == 1
