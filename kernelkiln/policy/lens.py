"""Strategy lenses: data files that specialise one agent each (tiling, vectorization, …).

A lens is a YAML file in ``kernelkiln/policy/lenses/``: a short playbook for LLM
agents, the knob-name patterns a tuner explores first, and an eligibility map over op
families, so a GEMM-only lens is never given to an elementwise task.
"""

from __future__ import annotations

import fnmatch
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from kernelkiln.errors import UserError

LENS_DIR = Path(__file__).with_name("lenses")


class Lens(BaseModel):
    """One strategy specialisation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Identifier, the file's stem.")
    title: str = Field(description="A few words shown in progress output.")
    playbook: str = Field(description="What an agent with this lens tries, in what order (prompt text).")
    families: tuple[str, ...] = Field(("*",), description="Op families it is eligible for; '*' means any.")
    exclude: tuple[str, ...] = Field((), description="Op families it is never given, even under '*'.")
    knobs: tuple[str, ...] = Field((), description="Knob-name patterns (fnmatch) a tuner with this lens tries first.")
    priority: int = Field(50, description="Lower is handed out first: a single agent gets the broadest eligible lens.")

    def eligible(self, op_family: str | None) -> bool:
        """Whether this lens may be given to a task of ``op_family`` (None: a task without one)."""
        family = op_family or "unknown"
        if family in self.exclude:
            return False
        return "*" in self.families or family in self.families

    def prefers(self, knob: str) -> bool:
        """Whether ``knob`` is one this lens explores first."""
        return any(fnmatch.fnmatchcase(knob, p) for p in self.knobs)


@lru_cache(maxsize=1)
def load_lenses() -> tuple[Lens, ...]:
    """Every bundled lens, in name order."""
    lenses = []
    for path in sorted(LENS_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text()) or {}
        lenses.append(Lens(name=path.stem, **data))
    return tuple(lenses)


def eligible_lenses(op_family: str | None) -> list[Lens]:
    """The lenses a task of ``op_family`` may get, by priority then name."""
    return sorted(
        (lens for lens in load_lenses() if lens.eligible(op_family)), key=lambda lens: (lens.priority, lens.name)
    )


def assign_lenses(op_family: str | None, agents: int) -> list[Lens]:
    """A different eligible lens for each of ``agents`` agents."""
    lenses = eligible_lenses(op_family)
    if agents > len(lenses):
        raise UserError(
            f"{agents} agents asked for, but only {len(lenses)} lenses suit op family "
            f"{op_family or 'unknown'!r}: use --agents {len(lenses)} or fewer"
        )
    return lenses[:agents]
