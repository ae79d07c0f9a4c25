"""``kiln memory prune``: remove what memory no longer learns from.

It removes exactly two things: (1) board entries older than each task's retention
horizon (the latest H are kept), and (2) experiences (not knowledge, not resident) that
were retrieved in at least ``min_retrievals`` stages, never adopted, and whose Q sits at
the floor −η, together with their adoption records. Attempts, rules, stages, runs and
knowledge are never pruned.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelkiln.memory.config import MemoryConfig
from kernelkiln.store.store import Store

_FLOOR_SLACK = 1e-9


@dataclass(frozen=True)
class PruneReport:
    """What a prune removed (or would remove, in a dry run)."""

    board_entries: int
    experiences: list[str] = field(default_factory=list)
    dry_run: bool = False


def prune(store: Store, config: MemoryConfig | None = None, *, dry_run: bool = False) -> PruneReport:
    """Prune the store (one transaction); ``dry_run`` only counts."""
    config = config or MemoryConfig()
    floor = -config.value.eta + _FLOOR_SLACK
    with store.write() as conn:
        dead = [
            e.id
            for e in store.experiences.list(conn, kind="experience", resident=False)
            if e.adoptions == 0 and e.retrievals >= config.prune.min_retrievals and e.q <= floor
        ]
        horizon = config.board.horizon
        if dry_run:
            board = sum(max(0, len(store.board.for_task(conn, t)) - horizon) for t in store.board.task_ids(conn))
            return PruneReport(board_entries=board, experiences=dead, dry_run=True)
        board = sum(store.board.trim(conn, t, horizon) for t in store.board.task_ids(conn))
        store.adoptions.delete_for_experiences(conn, dead)
        store.experiences.delete(conn, dead)
        return PruneReport(board_entries=board, experiences=dead)
