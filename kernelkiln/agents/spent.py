"""What one llm turn has spent, across its calls and protocols, what its unusable replies lacked, and how the
turn ends: a Proposal (with its journal and its adoption records, stated or not) or GaveUp."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelkiln.agents.protocol import Mode
from kernelkiln.agents.reply import Problem
from kernelkiln.context import Prompt
from kernelkiln.llm import Completion
from kernelkiln.policy.turn import Choice, GaveUp, Proposal
from kernelkiln.store.records import SUMMARY_CHARS, Case


@dataclass
class Spent:
    """Tokens and cost of one turn's calls, and what its unusable replies lacked."""

    prompt: int = 0
    completion: int = 0
    cost: float = 0.0
    calls: list[tuple[int, int]] = field(default_factory=list)
    text: str = ""  # the replies' prose, for the journal
    submit_problems: list[str] = field(default_factory=list)  # the last incomplete submit_candidate's
    text_problems: list[list[Problem]] = field(default_factory=list)  # each unusable reply's in text mode

    def add(self, reply: Completion, notes: str) -> None:
        self.prompt += reply.prompt_tokens
        self.completion += reply.completion_tokens
        self.cost += reply.cost_usd
        self.calls.append((reply.prompt_tokens, reply.completion_tokens))
        if notes.strip():
            self.text += notes.strip() + "\n"

    def proposed(
        self, parent_id: str | None, code: str, summary: str, choices: tuple[Choice, ...], prompt: Prompt
    ) -> Proposal:
        """The turn's candidate, with everything its calls cost; the shown experiences ``choices`` does not
        account for are recorded as not stated."""
        shown = prompt.shown_experiences
        summary = " ".join(str(summary).split())[:SUMMARY_CHARS]
        notes = self.text.strip()
        unstated = [i for i in shown if i not in {c.experience_id for c in choices}]
        journal = (
            f"## Strategy\n{summary}\n\n## Adoptions\n"
            + "".join(f"- {c.experience_id}: {'adopted' if c.adopted else 'not adopted'} ({c.why})\n" for c in choices)
            + "".join(f"- {i}: not stated\n" for i in unstated)
            + (f"\n## Model's notes\n{notes[:1200]}\n" if notes else "")
        )
        case = Case(
            move="llm", calls=list(self.calls), prompt_tier=prompt.tier, adoptions_owed=len(shown), not_stated=unstated
        )
        return Proposal(
            code=code,
            summary=summary,
            parent_id=parent_id,
            choices=choices,
            journal=journal,
            case=case,
            prompt_tokens=self.prompt,
            completion_tokens=self.completion,
            cost_usd=self.cost,
        )

    def gave_up(self, mode: Mode, reason: str = "") -> GaveUp:
        """The turn's end without a candidate, and everything it cost; ``reason`` (default: what the
        replies lacked) says what to do."""
        return GaveUp(
            reason=" ".join((reason or self._lacked(mode)).split())[:400],
            prompt_tokens=self.prompt,
            completion_tokens=self.completion,
            cost_usd=self.cost,
            calls=tuple(self.calls),
        )

    def _lacked(self, mode: Mode) -> str:
        if mode == "text":  # the replies since the switch to text (those before it were asked for tool calls)
            texts = len(self.text_problems)
            parts = dict.fromkeys(p.part for problems in self.text_problems for p in problems)
            last = "; ".join(p.text for p in self.text_problems[-1]) if self.text_problems else ""
            return (
                f"the model answered {_times(texts)} in text without a usable {' / '.join(parts) or 'reply'} "
                f"(last: {last})"
            )
        n = len(self.calls)
        if self.submit_problems:
            replies = "1 reply" if n == 1 else f"{n} replies"
            return (
                f"the model gave no complete submit_candidate call in {replies} "
                f"(last: {'; '.join(self.submit_problems)})"
            )
        return (
            f"the model answered {_times(n)} without calling submit_candidate; this endpoint may not "
            "support tool calls: try --reply-protocol text"
        )


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"
