"""The optimizer's configuration: one pydantic tree, every field used by the loop.

`kiln optimize|bench|ablate --config kiln.toml` loads it from a file (see ``cli/settings.py``);
`kiln config show` prints every field with its description and where its value came from.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from kernelkiln.agents.config import DEFAULT_POLICY, PolicyConfig
from kernelkiln.context.config import ContextConfig
from kernelkiln.evaluation.config import ClusterConfig
from kernelkiln.guard.config import GuardConfig
from kernelkiln.memory.config import MemoryConfig
from kernelkiln.orchestrator.migration import migrated
from kernelkiln.store.config import StoreConfig

SEARCH_TIME_BUDGET_S = 8.0
# A whole model's searches when nothing sets them (`kiln model`, `kernelkiln.optimize_model`): evaluations per
# task on average, and seconds for all of them (a large region's evaluation takes most of a minute)
MODEL_BUDGET_PER_TASK = 15
MODEL_WALL_S = 1200.0


def search_guard(**overrides: object) -> GuardConfig:
    """The guard an optimizer run uses by default: `kiln eval`'s, with a shorter timing budget.

    A search evaluation must rank a candidate against the incumbent, and the noise band
    says how sure that ranking is; 8 s instead of 20 s per candidate roughly halves a
    run. `kiln eval --time-budget` re-measures a best.py more tightly.
    """
    return GuardConfig(**{"time_budget_s": SEARCH_TIME_BUDGET_S, **overrides})


class OptimizeConfig(BaseModel):
    """What ``kiln optimize`` runs: policy, agents, budgets, and the components' settings."""

    model_config = ConfigDict(extra="forbid")

    policy: PolicyConfig = Field(
        default_factory=DEFAULT_POLICY,
        description="Who proposes candidates, and that policy's own settings (kind: tuner, llm or replay).",
    )
    agents: int = Field(1, ge=1, le=8, description="Agents per task, each with a different eligible strategy lens.")
    budget: int = Field(30, ge=1, description="Evaluations per task, shared by its agents (ATU's turn budget).")
    max_tokens: int | None = Field(
        None, ge=1, description="Stop starting new turns once the run's prompt plus completion tokens reach this."
    )
    max_wall_s: float | None = Field(
        None,
        gt=0,
        description="Stop starting new turns after this many seconds (counted afresh when a run resumes; 0: no "
        "limit). For a whole model: the seconds for all its tasks' searches, split by time share.",
    )
    r_draft: int = Field(
        5,
        ge=1,
        description="Plateau length (ACCEPT/REVERT since the last KEEP) at which an agent "
        "drafts: it abandons local tuning and changes strategy.",
    )
    platform: Literal["cpu", "cuda"] = Field(
        "cpu",
        description="Where candidates run and are timed; the task's starting candidate for this platform starts "
        "the search.",
    )
    # Every policy starts from it (the tuner must, a model may), and the run's starting code reads it beside platform.
    start_file: str | None = Field(
        None,
        validation_alias=AliasChoices("start_file", "seed_file"),  # seed_file: its earlier name
        description="A candidate file every agent starts from, instead of the task's "
        "KILN start or the generated one (--start FILE; one task per run).",
    )
    confirm_time_budget_s: float | None = Field(
        20.0,
        gt=0,
        description="When a task ends, its best is judged "
        "again in a fresh session timing for this long; that figure is "
        "the task's reported speedup (0 or None: report the search's "
        "figure).",
    )
    guard: GuardConfig = Field(
        default_factory=search_guard, description="How candidates are judged (a timing budget of 8 s unless set)."
    )
    memory: MemoryConfig = Field(default_factory=MemoryConfig, description="Experience values, rules, board.")
    context: ContextConfig = Field(default_factory=ContextConfig, description="What an agent is shown each turn.")
    cluster: ClusterConfig = Field(
        default_factory=ClusterConfig, description="Where candidates are judged (--cluster local|ray|ray://HOST:PORT)."
    )
    store: StoreConfig = Field(
        default_factory=StoreConfig,
        exclude=True,
        description="Where memory lives; not kept with a run (a run is resumed from its store).",
    )

    @classmethod
    def stored(cls, data: dict[str, Any]) -> OptimizeConfig:
        """The configuration a run stored, including runs stored by earlier versions (moved keys moved)."""
        return cls.model_validate(migrated(data))

    @field_validator("max_wall_s", mode="before")
    @classmethod
    def _zero_is_no_limit(cls, value: object) -> object:
        return None if value == 0 else value  # TOML has no null: 0 is no limit, as --max-wall 0 is

    @field_validator("confirm_time_budget_s", mode="before")
    @classmethod
    def _zero_is_off(cls, value: object) -> object:
        return None if value == 0 else value  # TOML has no null: 0 turns confirmation off, as --confirm-budget 0 does

    @field_validator("guard", mode="before")
    @classmethod
    def _search_timing(cls, value: object) -> object:
        # A partial guard table (a file's [guard], a flag) keeps the search's timing budget unless it sets one.
        return {"time_budget_s": SEARCH_TIME_BUDGET_S, **value} if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _stages_follow_the_budget(self) -> OptimizeConfig:
        # The run's budget is the one turn budget; memory's stages close by it.
        if self.memory.value.turn_budget != self.budget:
            value = self.memory.value.with_turn_budget(self.budget)
            self.memory = self.memory.model_copy(update={"value": value})
        return self

    @model_validator(mode="after")
    def _start_or_scratch(self) -> OptimizeConfig:
        # The one check across the policy's config: a file to start from is the run's, scratch the model's.
        if self.start_file and self.policy.from_scratch():
            raise ValueError("--start FILE and --from-scratch contradict each other: give one")
        return self

    @model_validator(mode="after")
    def _isolation_follows_the_policy(self) -> OptimizeConfig:
        # Each policy says how far its candidates are trusted; the guard's own setting wins.
        if "isolation" not in self.guard.model_fields_set and self.guard.isolation != self.policy.isolation:
            self.guard = self.guard.model_copy(update={"isolation": self.policy.isolation})
        return self

    @model_validator(mode="after")
    def _guard_on_the_run_platform(self) -> OptimizeConfig:
        if self.guard.platform != self.platform:  # the run's platform decides where candidates are judged
            if "platform" in self.guard.model_fields_set:
                raise ValueError(f"guard.platform follows platform: set platform = {self.guard.platform!r} instead")
            self.guard = self.guard.model_copy(update={"platform": self.platform})
        return self
