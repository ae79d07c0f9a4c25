from kernelkiln.memory import Memory, MemoryConfig
from kernelkiln.memory.config import BoardConfig
from kernelkiln.store.records import Experience


def test_prune_removes_only_dead_experiences_and_board_overflow(store):
    wide = Memory(store, MemoryConfig(board=BoardConfig(horizon=10)))
    for i in range(6):
        wide.board.post("t", "trap", f"trap {i}")
    dead = dict(q=-0.2, retrievals=12, adoptions=0)
    with store.write() as conn:
        store.experiences.add_many(
            conn,
            [
                Experience(id="e-dead", text="x", **dead),
                Experience(id="e-young", text="x", q=-0.2, retrievals=3),
                Experience(id="e-adopted", text="x", q=-0.2, retrievals=12, adoptions=1),
                Experience(id="e-resident", text="x", resident=True, **dead),
                Experience(id="k-doc", kind="knowledge", text="x", **dead),
                Experience(id="e-ok", text="x", q=-0.1, retrievals=12),
            ],
        )
    narrow = Memory(store, MemoryConfig(board=BoardConfig(horizon=2)))
    preview = narrow.prune(dry_run=True)
    assert (preview.board_entries, preview.experiences, preview.dry_run) == (4, ["e-dead"], True)
    with store.read() as conn:
        assert store.experiences.count(conn) == 6 and store.board.count(conn) == 6
    report = narrow.prune()
    assert (report.board_entries, report.experiences) == (4, ["e-dead"])
    with store.read() as conn:
        assert store.experiences.get(conn, "e-dead") is None
        assert store.experiences.count(conn) == 5
    assert [e.summary for e in narrow.board.read("t")] == ["trap 4", "trap 5"]
    assert narrow.prune().board_entries == 0
