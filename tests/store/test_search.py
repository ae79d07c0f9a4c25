from kernelkiln.memory.config import RetrievalConfig
from kernelkiln.store.records import Experience
from kernelkiln.store.search import query_terms, search_experiences


def _add(store, *experiences):
    with store.write() as conn:
        store.experiences.add_many(conn, list(experiences))


def test_query_terms_are_distinct_lowercase_words():
    assert query_terms("Tile the MATMUL; tile it! (avx2)") == ["tile", "the", "matmul", "it", "avx2"]
    assert query_terms("  ;; ") == []


def test_more_shared_words_rank_higher(store):
    _add(
        store,
        Experience(id="e-both", text="vectorize the reduction loop with avx2"),
        Experience(id="e-one", text="vectorize elementwise kernels"),
        Experience(id="e-none", text="transpose for layout"),
        *[Experience(id=f"e-fill{i}", text=f"unrelated filler note {i}") for i in range(8)],
    )
    with store.read() as conn:
        hits = search_experiences(conn, "vectorize reduction", limit=5)
    assert [e.id for e, _ in hits] == ["e-both", "e-one"]
    assert hits[0][1] > hits[1][1] > 0


def test_stemming_matches_word_forms(store):
    _add(store, Experience(id="e-1", text="tiling the loops helps"))
    with store.read() as conn:
        assert [e.id for e, _ in search_experiences(conn, "tiled loop", limit=5)] == ["e-1"]


def test_tags_filter_but_unset_tags_apply_anywhere(store):
    _add(
        store,
        Experience(id="e-cpu", text="unroll loop", platform="cpu"),
        Experience(id="e-cuda", text="unroll loop", platform="cuda"),
        Experience(id="e-any", text="unroll loop"),
    )
    with store.read() as conn:
        ids = {e.id for e, _ in search_experiences(conn, "unroll", limit=10, platform="cpu")}
    assert ids == {"e-cpu", "e-any"}


def test_tags_are_searchable(store):
    _add(store, Experience(id="e-1", text="split the work", op_family="layernorm"))
    with store.read() as conn:
        assert [e.id for e, _ in search_experiences(conn, "layernorm", limit=5)] == ["e-1"]


def test_resident_and_other_kinds_are_left_out(store):
    _add(
        store,
        Experience(id="e-res", text="prefetch rows", resident=True),
        Experience(id="e-doc", text="prefetch rows", kind="knowledge"),
        Experience(id="e-exp", text="prefetch rows"),
    )
    with store.read() as conn:
        assert {e.id for e, _ in search_experiences(conn, "prefetch", limit=10)} == {"e-doc", "e-exp"}
        only = search_experiences(conn, "prefetch", limit=10, kinds=("experience",))
        assert [e.id for e, _ in only] == ["e-exp"]
        assert len(search_experiences(conn, "prefetch", limit=10, include_resident=True)) == 3


def test_updates_and_deletes_reach_the_index(store):
    _add(store, Experience(id="e-1", text="old words"))
    with store.write() as conn:
        store.experiences.update(conn, "e-1", text="fresh words")
    with store.read() as conn:
        assert search_experiences(conn, "old", limit=5) == []
        assert [e.id for e, _ in search_experiences(conn, "fresh", limit=5)] == ["e-1"]
    with store.write() as conn:
        store.experiences.delete(conn, ["e-1"])
    with store.read() as conn:
        assert search_experiences(conn, "fresh", limit=5) == []
    assert store.integrity_errors() == []


def test_limit_bounds_the_pool(store):
    _add(store, *[Experience(text=f"gather scatter {i}") for i in range(30)])
    with store.read() as conn:
        assert len(search_experiences(conn, "gather", limit=20)) == 20


def test_common_words_are_left_out_under_a_postings_budget(sqlite_store):
    # SQLite only: the postings budget applies to its BM25 ranking
    from kernelkiln.store.search import document_counts, selective_terms

    _add(
        sqlite_store,
        *[Experience(text=f"the loop number {i}") for i in range(30)],
        Experience(id="e-rare", text="the prefetch trick"),
    )
    with sqlite_store.read() as conn:
        assert document_counts(conn, ["the", "prefetching", "absent"], cap=100) == {
            "the": 31,
            "prefetching": 1,
            "absent": 0,
        }
        assert document_counts(conn, ["the"], cap=5) == {"the": 5}  # counting stops at the cap
        # Rarest first while the counts fit: prefetch (1) fits, the (31) would not.
        assert selective_terms(conn, ["the", "prefetching", "absent"], budget=10) == ["prefetching"]
        assert selective_terms(conn, ["the", "prefetching"], budget=100) == ["prefetching", "the"]
        # When no word fits, the rarest one, counted exactly (both saturate a cap of 2).
        assert selective_terms(conn, ["the", "loop"], budget=1) == ["loop"]
        assert selective_terms(conn, ["absent"], budget=1) == []
        assert [e.id for e, _ in search_experiences(conn, "the prefetch", limit=5, postings_budget=10)] == ["e-rare"]
        assert len(search_experiences(conn, "the prefetch", limit=50)) == 31


def test_an_experience_added_after_a_search_of_the_empty_store_is_found_by_the_next_search(sqlite_store):
    """The first search of a new store counts every word at zero; a run that cached those counts found none of
    the experiences its later tasks stored (a replayed ablation showed no experience ever retrieved)."""
    budget = RetrievalConfig().postings_budget  # retrieval's: words are then chosen by their cached counts
    with sqlite_store.read() as conn:
        assert search_experiences(conn, "accumulators norm", limit=5, postings_budget=budget) == []
    _add(sqlite_store, Experience(id="e-late", text="norm on cpu: setting ACCUMULATORS=16 made rms_norm faster"))
    with sqlite_store.read() as conn:
        hits = search_experiences(conn, "accumulators norm", limit=5, postings_budget=budget)
    assert [e.id for e, _ in hits] == ["e-late"]
