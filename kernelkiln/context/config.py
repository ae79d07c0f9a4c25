"""Configuration of what an agent sees each turn: the layers, their caps and the ablation switch."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ContextConfig(BaseModel):
    """What an agent sees each turn, and how its prompt is filled (docs/architecture.md § Budgeted, layered context).

    The ``max_*`` counts bound what memory retrieves for a turn (the tuner reads it too),
    and the prompt's sections.
    """

    model_config = ConfigDict(extra="forbid")

    mode: Literal["active", "passive"] = Field(
        default="active",
        description="active: hot, recent, warm and cold layers under the budget B_k. passive (ablations only): "
        "everything shown to the agent on the task so far accumulates, with no budget and no caps.",
    )
    recent_turns: int = Field(
        default=2,
        ge=0,
        description="R: the agent's latest earlier attempts kept in full (besides the latest feedback).",
    )
    warm_share: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="Cap on the warm layer as a share of B_k; the cold layer gets what remains.",
    )
    max_experiences: int = Field(
        default=5, ge=0, description="Experiences retrieved for an agent each turn, and shown at most (0: none)."
    )
    max_graph_attempts: int = Field(
        default=5, ge=0, description="Graph-ranked attempts of the task offered each turn, and shown at most (0: none)."
    )
    max_board_entries: int = Field(default=8, ge=0, description="Board wins and traps shown at most.")
    max_knowledge: int = Field(
        default=3,
        ge=0,
        description="Platform knowledge sections retrieved for the cold layer each turn, and shown at most (0: none).",
    )
    max_diagnostics: int = Field(default=20, ge=0, description="Diagnostics of the latest feedback shown at most.")
    code_excerpt_chars: int = Field(
        default=1500,
        ge=0,
        description="Cap on the code shown for earlier attempts, graph attempts and leaderboard snapshots "
        "(0: none); the working code and the task's reference are always shown whole.",
    )
