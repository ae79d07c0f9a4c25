"""The context builder: one prompt per turn from hot, recent, warm and cold layers (KOPE).

Active mode, in prompt order:
- hot (always, never cut): the task (reference source, workloads, op family, platform),
  the lens's playbook, the objective, the working code, the latest feedback, and when
  drafting the draft directive with the leaderboard;
- recent: the agent's last R earlier attempts;
- warm, capped at ``warm_share``·B_k: resident rules, retrieved experiences,
  graph-ranked attempts, board wins and traps;
- cold, with what B_k has left: platform knowledge.
B_k = max(0, W − S − G − R) with S the system prompt and tools, G the reserved
generation, and R the hot and recent tokens (both are kept verbatim). Warm and cold items
are added whole in rank order, and an item that does not fit is skipped, so
S + user ≤ W − G whenever the hot and recent layers fit at all.

Passive mode (ablations only) shows everything the agent was shown on the task before,
uncapped; see ``passive.py``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from kernelkiln.context.budget import knowledge_budget
from kernelkiln.context.config import ContextConfig
from kernelkiln.context.estimator import TokenEstimator
from kernelkiln.context.passive import PassiveMemory
from kernelkiln.context.prompt import Layer, Prompt, Section
from kernelkiln.context.prompts import render
from kernelkiln.context.sections import (
    Piece,
    attempt_pieces,
    board_pieces,
    experience_pieces,
    heading,
    hot_pieces,
    knowledge_pieces,
    rule_pieces,
)
from kernelkiln.context.tiers import Tier
from kernelkiln.policy.turn import Turn
from kernelkiln.store.records import SUMMARY_CHARS

SEP = "\n\n"  # between pieces, and between sections (turn.md.j2 joins with the same)


@dataclass(frozen=True)
class _Block:
    """A section's offered pieces in rank order, and how many of them may be shown at most."""

    name: str
    layer: Layer
    pieces: tuple[Piece, ...]
    cap: int | None = None


class ContextBuilder:
    """Assembles each turn's prompt under the model's window."""

    def __init__(self, config: ContextConfig | None = None, estimator: TokenEstimator | None = None):
        self.config = config or ContextConfig()
        self.estimator = estimator or TokenEstimator()
        self._passive: dict[tuple[str, str], PassiveMemory] = {}
        self._lock = threading.Lock()

    def build(
        self,
        turn: Turn,
        *,
        window: int,
        generation: int,
        tools_tokens: int = 0,
        protocol: str = "tools",
        tier: Tier = "full",
    ) -> Prompt:
        """The prompt for ``turn`` within a ``window``-token model that keeps ``generation`` tokens for its reply.

        ``protocol``: how the reply hands in the candidate, "tools" (submit_candidate) or "text";
        ``tier``: how long each section is said (``tiers.py``; minimal shows no context layer).
        """
        c, passive = self.config, self.config.mode == "passive"
        name = "system" if tier == "full" else f"system-{tier}"
        system = render(name, platform=turn.platform, summary_chars=SUMMARY_CHARS, protocol=protocol)
        system_tokens = self.estimator.estimate(system) + tools_tokens
        hot = [
            (name, (piece,))
            for name, piece in hot_pieces(
                turn,
                max_diagnostics=10**9 if passive else c.max_diagnostics,
                code_chars=None if passive else c.code_excerpt_chars,
                tier=tier,
            )
        ]
        blocks = self._passive_blocks(turn) if passive else self._active_blocks(turn)
        if tier == "minimal":  # the task, the code, the verdict and one instruction: no layer of context
            blocks = [_Block(b.name, b.layer, ()) for b in blocks]
        recent, warm, cold = (
            blocks[0],
            [b for b in blocks if b.layer == "warm"],
            [b for b in blocks if b.layer == "cold"],
        )

        kept_tokens = sum(self._cost(p.text) for _, (p,) in hot) + self._block_cost(recent, recent.pieces)
        budget = knowledge_budget(window, system_tokens, generation, kept_tokens)
        if passive:
            chosen = {b.name: b.pieces for b in blocks}
        else:
            chosen = {recent.name: recent.pieces}
            warm_used = self._fill(warm, int(c.warm_share * budget), chosen)
            self._fill(cold, budget - warm_used, chosen)

        sections, texts = [], []
        for name, (piece,) in hot:
            sections.append(Section(name, "hot", self._cost(piece.text), 1, 1, False))
            texts.append(piece.text)
        for block in blocks:
            shown = chosen[block.name]
            parts = [heading(block.name, [p.key for p in shown]), *(p.text for p in shown)] if shown else []
            sections.append(
                Section(
                    block.name,
                    block.layer,
                    sum(self._cost(t) for t in parts),
                    len(block.pieces),
                    len(shown),
                    len(shown) < len(block.pieces),
                )
            )
            if parts:
                texts.append(SEP.join(parts))
        user = render("turn", sections=texts)
        return Prompt(
            system=system,
            user=user,
            sections=tuple(sections),
            budget=budget,
            estimated_tokens=system_tokens + self.estimator.estimate(user),
            shown_experiences=tuple(p.key for p in chosen["experiences"]),
            tier=tier,
        )

    # -- what each layer offers ----------------------------------------------------------------
    def _active_blocks(self, turn: Turn) -> list[_Block]:
        c = self.config
        latest = turn.feedback.id if turn.feedback else None
        earlier = [a for a in turn.history if a.id != latest]
        recent = earlier[-c.recent_turns :] if c.recent_turns else []
        in_view = {latest, turn.parent_id, *(a.id for a in recent)} - {None}
        rule_ids = {r.id for r in turn.rules}
        return [
            _Block("history", "recent", tuple(attempt_pieces(recent, c.code_excerpt_chars))),
            _Block("rules", "warm", tuple(rule_pieces(turn.rules))),
            _Block(
                "experiences",
                "warm",
                tuple(experience_pieces(r for r in turn.experiences if r.experience.id not in rule_ids)),
                c.max_experiences,
            ),
            _Block(
                "graph",
                "warm",
                tuple(attempt_pieces((a for a in turn.graph if a.id not in in_view), c.code_excerpt_chars)),
                c.max_graph_attempts,
            ),
            _Block("board", "warm", tuple(board_pieces(turn.board)), c.max_board_entries),
            _Block("knowledge", "cold", tuple(knowledge_pieces(turn.knowledge)), c.max_knowledge),
        ]

    def _passive_blocks(self, turn: Turn) -> list[_Block]:
        with self._lock:
            memory = self._passive.setdefault((turn.task.name, turn.agent), PassiveMemory())
        memory.absorb(turn)
        earlier = memory.earlier(turn)
        in_view = {p.key for p in earlier} | {turn.feedback.id if turn.feedback else None, turn.parent_id}
        return [
            _Block("history", "recent", tuple(earlier)),
            _Block("rules", "warm", tuple(memory.rules.values())),
            _Block("experiences", "warm", tuple(p for k, p in memory.experiences.items() if k not in memory.rules)),
            _Block("graph", "warm", tuple(p for k, p in memory.graph.items() if k not in in_view)),
            _Block("board", "warm", tuple(memory.board.values())),
            _Block("knowledge", "cold", tuple(memory.knowledge.values())),
        ]

    # -- token accounting ------------------------------------------------------------------------
    def _cost(self, text: str) -> int:
        """Tokens of a piece with the separator that follows it: the pieces' costs bound the whole's."""
        return self.estimator.estimate(text + SEP)

    def _block_cost(self, block: _Block, pieces: tuple[Piece, ...]) -> int:
        if not pieces:
            return 0
        return self._cost(heading(block.name, [p.key for p in pieces])) + sum(self._cost(p.text) for p in pieces)

    def _fill(self, blocks: list[_Block], cap: int, chosen: dict[str, tuple[Piece, ...]]) -> int:
        """Choose each block's pieces in rank order while they fit ``cap`` (skipping those that do not); tokens used."""
        used = 0
        for block in blocks:
            offered = block.pieces[: block.cap] if block.cap is not None else block.pieces
            # The heading is paid with the first piece; its longest form lists every offered id.
            head = self._cost(heading(block.name, [p.key for p in offered]))
            shown: list[Piece] = []
            for piece in offered:
                need = self._cost(piece.text) + (0 if shown else head)
                if used + need <= cap:
                    shown.append(piece)
                    used += need
            chosen[block.name] = tuple(shown)
        return used
