"""Passive context (ablations only): everything one agent was shown on a task, kept forever.

Each turn's items join what earlier turns showed, first-seen order, nothing dropped and
nothing capped, so the prompt grows turn over turn: the baseline KOPE's budget beats.
"""

from __future__ import annotations

from kernelkiln.context.sections import (
    Piece,
    attempt_pieces,
    board_pieces,
    experience_pieces,
    feedback_text,
    knowledge_pieces,
    rule_pieces,
)
from kernelkiln.guard.verdict import Verdict
from kernelkiln.policy.turn import Turn
from kernelkiln.store.records import Attempt


class PassiveMemory:
    """What one agent has been shown on one task, by section, in first-seen order."""

    def __init__(self) -> None:
        self.feedback: dict[str, Piece] = {}  # every evaluated attempt of the agent: full feedback and code
        self.rules: dict[str, Piece] = {}
        self.experiences: dict[str, Piece] = {}
        self.graph: dict[str, Piece] = {}
        self.board: dict[str, Piece] = {}
        self.knowledge: dict[str, Piece] = {}

    def absorb(self, turn: Turn) -> None:
        """Add the turn's material to what was shown before."""
        latest = turn.feedback
        if latest is not None and (turn.verdict is not None or latest.id not in self.feedback):
            self.feedback[latest.id] = _full(latest, turn.verdict)  # the richest record: with the verdict
        for attempt in turn.history:
            if attempt.id not in self.feedback:
                self.feedback[attempt.id] = _full(attempt, None)
        for store, pieces in (
            (self.rules, rule_pieces(turn.rules)),
            (self.experiences, experience_pieces(turn.experiences)),
            (self.graph, attempt_pieces(turn.graph, None)),
            (self.board, board_pieces(turn.board)),
            (self.knowledge, knowledge_pieces(turn.knowledge)),
        ):
            for piece in pieces:
                store.setdefault(piece.key, piece)

    def earlier(self, turn: Turn) -> list[Piece]:
        """Every evaluated attempt but the latest (which is the hot layer's feedback), oldest first."""
        latest = turn.feedback.id if turn.feedback else None
        return [p for key, p in self.feedback.items() if key != latest]


def _full(attempt: Attempt, verdict: Verdict | None) -> Piece:
    """The attempt's whole feedback, diagnostics and code."""
    text = feedback_text(attempt, verdict, "", max_diagnostics=10**9, code_chars=None, heading="### Earlier attempt")
    return Piece(attempt.id, text)
