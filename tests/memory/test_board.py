from kernelkiln.memory.board import Board, cap, entry_for_attempt
from kernelkiln.memory.config import BoardConfig
from kernelkiln.testing.memory_fakes import attempt


def test_cap():
    assert cap("short", 10) == "short"
    assert cap("x" * 20, 10) == "x" * 9 + "…"


def test_posts_are_capped(store):
    board = Board(store)
    entry = board.post("t", "win", "s" * 300, "r" * 5000, agent="tiler", speedup=1.7)
    assert len(entry.summary) == 160 and len(entry.reflection) == 1200
    assert board.read("t") == [entry]


def test_retention_horizon(store):
    board = Board(store, BoardConfig(horizon=4))
    for i in range(10):
        board.post("t", "trap", f"trap {i}")
    assert [e.summary for e in board.read("t")] == ["trap 6", "trap 7", "trap 8", "trap 9"]


def test_verdicts_imply_conclusions(store):
    board = Board(store)
    win = entry_for_attempt(board, attempt(verdict="KEEP", speedup=2.5, summary="unroll x4"))
    assert (win.kind, win.summary, win.speedup) == ("win", "unroll x4 (2.50x)", 2.5)
    trap = entry_for_attempt(board, attempt(verdict="REJECT", summary="avx512", error_class="build"))
    assert (trap.kind, trap.summary) == ("trap", "avx512 [build]")
    assert entry_for_attempt(board, attempt(verdict="ACCEPT")) is None
    assert entry_for_attempt(board, attempt(verdict="REVERT")) is None
