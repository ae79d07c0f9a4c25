import pytest

from kernelkiln.memory.config import RetrievalConfig
from kernelkiln.memory.retrieval import Retriever, blend, value_score
from kernelkiln.store.records import Experience
from kernelkiln.testing.memory_fakes import attempt


def test_value_score_multiplier_stays_within_0_9_and_1_5():
    assert value_score(2.0, 1.0, 0.5) == pytest.approx(3.0)
    assert value_score(2.0, -0.2, 0.5) == pytest.approx(1.8)
    assert value_score(2.0, 0.0, 0.5) == pytest.approx(2.0)


def test_blend():
    assert blend(3.0, 3.0, 1.0, 2.0, 0.3) == pytest.approx(0.85)
    assert blend(1.0, 2.0, 0.0, 0.0, 0.3) == pytest.approx(0.35)


def _add(store, *experiences):
    with store.write() as conn:
        store.experiences.add_many(conn, list(experiences))


def test_value_reranks_equally_relevant_experiences(store):
    _add(
        store,
        Experience(id="e-low", text="fuse the softmax passes", q=-0.2),
        Experience(id="e-high", text="fuse the softmax passes", q=0.8),
    )
    hits = Retriever(store).retrieve("fuse softmax")
    assert [h.experience.id for h in hits] == ["e-high", "e-low"]
    assert hits[0].value_score / hits[1].value_score == pytest.approx(1.4 / 0.9)
    # No member has a graph score, so value alone decides: scores are value / max value.
    assert [h.score for h in hits] == pytest.approx([1.0, 0.9 / 1.4])


def test_relevance_alone_decides_the_pool(store):
    _add(
        store,
        Experience(id="e-relevant", text="fuse softmax passes in one loop", q=-0.2),
        Experience(id="e-valuable", text="softmax note", q=1.0),
        *[Experience(text=f"filler {i}") for i in range(10)],
    )
    hits = Retriever(store, RetrievalConfig(pool_size=1, graph_weight=0)).retrieve("fuse softmax passes loop")
    assert [h.experience.id for h in hits] == ["e-relevant"]


def test_graph_score_of_the_source_attempt_is_blended_in(store):
    root = attempt("t", speedup=1.0)
    good = attempt("t", speedup=3.0, parent=root)
    bad = attempt("t", verdict="REJECT", parent=root)
    with store.write() as conn:
        for a in (root, good, bad):
            store.attempts.add(conn, a)
    _add(
        store,
        Experience(id="e-bad", text="blocked matmul", source_attempt_id=bad.id),
        Experience(id="e-good", text="blocked matmul", source_attempt_id=good.id),
    )
    hits = Retriever(store, RetrievalConfig(graph_weight=0.3)).retrieve("blocked matmul")
    assert [h.experience.id for h in hits] == ["e-good", "e-bad"]
    assert hits[0].graph_score == pytest.approx(3.0) and hits[1].graph_score == 0.0
    assert hits[0].score == pytest.approx(1.0) and hits[1].score == pytest.approx(0.7)


def test_filters_and_limit(store):
    _add(
        store,
        *[Experience(text=f"vectorize loop {i}", platform="cpu") for i in range(8)],
        Experience(text="vectorize loop", platform="cuda"),
    )
    retriever = Retriever(store, RetrievalConfig())
    assert len(retriever.retrieve("vectorize", limit=3)) == 3 and len(retriever.retrieve("vectorize")) == 9
    assert all(h.experience.platform == "cpu" for h in retriever.retrieve("vectorize", platform="cpu", limit=20))
    assert retriever.retrieve("") == []


def test_graph_scores_follow_new_attempts_of_a_task(store):
    root = attempt("t", speedup=1.0)
    with store.write() as conn:
        store.attempts.add(conn, root)
    _add(store, Experience(id="e-root", text="vectorized rows", source_attempt_id=root.id))
    retriever = Retriever(store, RetrievalConfig(graph_weight=0.3))
    assert retriever.retrieve("vectorized rows")[0].graph_score == pytest.approx(1.0)
    with store.write() as conn:  # a good child raises its parent's score: d = 1 + 0.5·0.9·2
        store.attempts.add(conn, attempt("t", speedup=2.0, parent=root))
    assert retriever.retrieve("vectorized rows")[0].graph_score == pytest.approx(1.9)
