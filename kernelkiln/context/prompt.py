"""What the context builder returns: the prompt's text and how its budget was spent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Layer = Literal["hot", "recent", "warm", "cold"]


@dataclass(frozen=True)
class Section:
    """One section of the user prompt and what the budget let into it."""

    name: str
    layer: Layer
    tokens: int  # estimated tokens of the text it contributes (0 when nothing of it is shown)
    items_total: int  # items the turn offered
    items_included: int  # items shown
    truncated: bool  # some offered items were left out (by a count cap or the budget)


@dataclass(frozen=True)
class Prompt:
    """A system and a user message for one turn, with their token accounting."""

    system: str
    user: str
    sections: tuple[Section, ...]
    budget: int  # B_k, tokens for the warm and cold layers (passive mode: computed, not enforced)
    estimated_tokens: int  # system + tools + user, as estimated before the call
    shown_experiences: tuple[str, ...]  # retrieved experience ids shown: the adoption records owed
    tier: str = "full"  # how long each section was said (context/tiers.py)

    def section(self, name: str) -> Section | None:
        """The section called ``name``, if any."""
        return next((s for s in self.sections if s.name == name), None)
