"""The conclusions-only shared board: wins and traps that parallel agents read and write.

Summaries are capped at 160 characters and reflections at 1200 (longer text is cut
with an ellipsis); each task keeps its latest H entries; a post is one transaction,
so concurrent agents never see half an entry or lose one to a race.
"""

from __future__ import annotations

from typing import Any

from kernelkiln.memory.config import BoardConfig
from kernelkiln.store.records import Attempt, BoardEntry, BoardKind
from kernelkiln.store.store import Store


def cap(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (the last one an ellipsis when cut)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + "…" if limit > 0 else ""


class Board:
    """Read and post conclusions for a task."""

    def __init__(self, store: Store, config: BoardConfig | None = None) -> None:
        self.store = store
        self.config = config or BoardConfig()

    def entry(
        self,
        task_id: str,
        kind: BoardKind,
        summary: str,
        reflection: str = "",
        *,
        agent: str = "",
        speedup: float | None = None,
        attempt_id: str | None = None,
    ) -> BoardEntry:
        """A capped entry, not yet posted."""
        return BoardEntry(
            task_id=task_id,
            agent=agent,
            kind=kind,
            summary=cap(summary, self.config.summary_chars),
            reflection=cap(reflection, self.config.reflection_chars),
            speedup=speedup,
            attempt_id=attempt_id,
        )

    def post(self, task_id: str, kind: BoardKind, summary: str, reflection: str = "", **fields: Any) -> BoardEntry:
        """Post a win or a trap; returns the stored entry."""
        entry = self.entry(task_id, kind, summary, reflection, **fields)
        with self.store.write() as conn:
            return self.store.board.post(conn, entry, self.config.horizon)

    def read(self, task_id: str) -> list[BoardEntry]:
        """The task's latest H entries, oldest first."""
        with self.store.read() as conn:
            return self.store.board.for_task(conn, task_id, limit=self.config.horizon)


def entry_for_attempt(board: Board, attempt: Attempt) -> BoardEntry | None:
    """The conclusion a verdict implies: KEEP → win, REJECT → trap, otherwise none."""
    summary = attempt.summary or attempt.lens or "candidate"
    if attempt.verdict == "KEEP":
        gain = f" ({attempt.speedup:.2f}x)" if attempt.speedup else ""
        return board.entry(
            attempt.task_id,
            "win",
            f"{summary}{gain}",
            attempt.journal,
            agent=attempt.agent,
            speedup=attempt.speedup,
            attempt_id=attempt.id,
        )
    if attempt.verdict == "REJECT":
        cause = f" [{attempt.error_class}]" if attempt.error_class else ""
        return board.entry(
            attempt.task_id, "trap", f"{summary}{cause}", attempt.journal, agent=attempt.agent, attempt_id=attempt.id
        )
    return None
