"""What each policy is configured with: one typed config per policy, chosen by its ``kind``.

``PolicyConfig`` is a discriminated union, so a field another policy reads cannot be set
(``search`` under the llm policy is an unknown field) and a policy's required input cannot
be missing (the llm policy's model, the replay policy's session).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from kernelkiln.llm.config import LLMConfig

Isolation = Literal["strict", "best-effort"]
KIND = (
    "The policy (--policy): tuner: offline knob search of the starting candidate (no network); llm: a model "
    "writes whole candidates (needs `llm`); replay: the llm policy answered offline by a recorded session "
    "(needs `session`). Each has only its own fields."
)


class _Policy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str  # each policy's own Literal: the union's discriminator, first in the tree

    # The guard's isolation this policy's candidates run under unless the guard sets one.
    isolation: ClassVar[Isolation] = "strict"
    # Whether the policy needs a starting candidate to start from (the run cannot go on without one).
    needs_start: ClassVar[bool] = False
    # Whether a model writes the candidates (evaluating the seed alone is then no candidate of the policy's).
    model_written: ClassVar[bool] = False

    def from_scratch(self) -> bool:
        """Whether agents write their first candidate themselves instead of starting from a seed."""
        return False

    def key_env(self) -> str | None:
        """The environment variable naming the model's API key (None: the policy calls no endpoint)."""
        return None

    def turns_without_candidate(self) -> int:
        """Turns in a row that give no candidate after which an agent stops working on the task."""
        return 1

    def for_repeat(self, k: int) -> _Policy:
        """This config for a benchmark's repeat ``k`` (independent trajectories where the policy draws at random)."""
        return self


class TunerConfig(_Policy):
    """The offline knob search of the starting candidate: no network."""

    kind: Literal["tuner"] = Field("tuner", description=KIND)
    # The tuner rewrites seeds the user installed; a model's code is untrusted.
    isolation: ClassVar[Isolation] = "best-effort"
    needs_start: ClassVar[bool] = True

    search: Literal["tpe", "enumerate", "random"] = Field(
        "tpe",
        description="How the tuner searches the knobs after memory's settings: tpe: Optuna's TPE sampler, "
        "told every attempt's rank and the trials memory lends, so values that measured slow are tried less; "
        "enumerate: single-knob moves from the working settings, then untried settings at random (the earlier "
        "search); random: best-of-N, the seed then untried settings uniformly at random, no memory (the floor "
        "`kiln ablate` measures every search against).",
    )
    seed: int = Field(
        0,
        ge=0,
        description="Seed of the tuner's random moves (its sampler, drafting jumps, untried "
        "settings): benchmark repeats use 0, 1, 2, … for independent trajectories.",
    )

    def for_repeat(self, k: int) -> TunerConfig:
        return self.model_copy(update={"seed": k})


class _ModelPolicy(_Policy):
    """What the llm and replay policies share: a model's turn, its limits, and where its exchanges are saved."""

    model_written: ClassVar[bool] = True

    tool_calls: int = Field(
        4,
        ge=0,
        description="Diagnostic tool calls (checks, profile, vectorization report) an "
        "llm agent may make per turn before it must submit.",
    )
    reasks: int = Field(
        2,
        ge=0,
        description="Times an llm agent is asked again for a reply that lacks the candidate, "
        "the summary or an adoption record, before its turn is given up.",
    )
    max_turns_without_candidate: int = Field(
        3,
        ge=1,
        description="Turns in a row an llm agent may give up (no usable candidate after its re-asks) "
        "before it stops working on the task; a turn that gives a candidate starts the count again. "
        "The task's reason in run.json says why it stopped.",
    )
    record: str | None = Field(
        None,
        description="A directory where every exchange with the model is saved "
        "(request, reply, usage, latency), one JSON-lines stream per task "
        "and agent, for `--policy replay`.",
    )
    start_from_candidate: bool = Field(
        True,
        validation_alias=AliasChoices("start_from_candidate", "start_from_seed"),  # start_from_seed: earlier name
        description="Agents start from a candidate: start_file, else the task's KILN start "
        "for the platform, else (cpu) the candidate `kiln lower` generates "
        "from the reference's operations. False (--from-scratch): agents "
        "write their first candidate from scratch.",
    )

    def from_scratch(self) -> bool:
        return not self.start_from_candidate

    def turns_without_candidate(self) -> int:
        return self.max_turns_without_candidate


class LLMPolicyConfig(_ModelPolicy):
    """A model writes whole candidates."""

    kind: Literal["llm"] = Field("llm", description=KIND)
    llm: LLMConfig = Field(description="The model endpoint.")

    def key_env(self) -> str | None:
        return self.llm.api_key_env

    @model_validator(mode="before")
    @classmethod
    def _needs_a_model(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("llm") is None:
            raise ValueError("the llm policy needs a model: --model NAME (and --base-url URL for a local server)")
        return data


class ReplayConfig(_ModelPolicy):
    """The llm policy answered offline by a recorded session; its model settings are the recording's."""

    kind: Literal["replay"] = Field("replay", description=KIND)
    session: str = Field(description="The recorded session (a `record` directory) the replay answers from.")

    @model_validator(mode="before")
    @classmethod
    def _needs_a_session(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("session"):
            raise ValueError("the replay policy needs a recorded session: --replay DIR (made with --record DIR)")
        return data

    @model_validator(mode="after")
    def _records_elsewhere(self) -> ReplayConfig:
        if self.record and Path(self.record).resolve() == Path(self.session).resolve():
            raise ValueError("--record and --replay name the same directory: record the replay elsewhere")
        return self


PolicyConfig = Annotated[TunerConfig | LLMPolicyConfig | ReplayConfig, Field(discriminator="kind")]
POLICIES: tuple[type[TunerConfig | LLMPolicyConfig | ReplayConfig], ...] = (
    TunerConfig,
    LLMPolicyConfig,
    ReplayConfig,
)
DEFAULT_POLICY = TunerConfig  # a run, or a [policy] table, that names no kind
KINDS = tuple(c.model_fields["kind"].default for c in POLICIES)
