from kernelkiln.memory import Memory
from kernelkiln.memory.knowledge import documents, platforms, sections, seed_knowledge


def test_cpu_has_the_three_cold_start_documents():
    assert "cpu" in platforms()
    assert set(documents("cpu")) == {"api_cheatsheet", "debugging", "examples"}
    assert documents("npu") == {}


def test_sections_have_stable_ids_and_tags():
    first, second = sections("cpu"), sections("cpu")
    assert [s.id for s in first] == [s.id for s in second]
    assert len({s.id for s in first}) == len(first) >= 12
    assert all(s.kind == "knowledge" and s.platform == "cpu" and len(s.summary) <= 160 for s in first)


def test_seeding_is_idempotent_and_updates_edited_sections(store):
    count = len(sections("cpu"))
    assert seed_knowledge(store, "cpu") == count
    assert seed_knowledge(store, "cpu") == 0
    some = sections("cpu")[0]
    with store.write() as conn:
        store.experiences.update(conn, some.id, text="stale")
    assert seed_knowledge(store, "cpu") == 1


def test_knowledge_is_retrievable_like_experiences(store):
    memory = Memory(store)
    memory.seed_knowledge("cpu")
    hits = memory.knowledge("horizontal sum of an avx2 register with intrinsics", platform="cpu", limit=3)
    assert "SIMD intrinsics" in hits[0].experience.summary
    hits = memory.knowledge("segfault out of bounds tail loop", platform="cpu", limit=3)
    assert "Crashes" in hits[0].experience.summary
    assert memory.retrieve("segfault tail loop") == []  # experiences only, by default
