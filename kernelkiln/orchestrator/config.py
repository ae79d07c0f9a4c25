"""The optimizer's configuration: one pydantic tree, every field used by the loop.

`kiln optimize|bench|ablate --config kiln.toml` loads it from a file (see ``cli/settings.py``);
`kiln config show` prints every field with its description and where its value came from.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kernelkiln.context.config import ContextConfig
from kernelkiln.guard.config import GuardConfig
from kernelkiln.llm.config import LLMConfig
from kernelkiln.memory.config import MemoryConfig
from kernelkiln.store.config import StoreConfig

PolicyName = Literal["tuner", "llm", "replay"]

SEARCH_TIME_BUDGET_S = 8.0

# Keys of runs stored before every field had one home: old key -> where it lives now (None: gone).
_MOVED = {
    ("experiences",): ("context", "max_experiences"),
    ("knowledge",): ("context", "max_knowledge"),
    ("graph_attempts",): ("context", "max_graph_attempts"),
    ("memory", "value", "turn_budget"): None,
    ("memory", "retrieval", "limit"): None,
}


class ClusterConfig(BaseModel):
    """Where candidates are judged: this machine, or the devices of a Ray cluster."""

    model_config = ConfigDict(extra="forbid")

    address: str = Field(
        "local",
        description="local: this process and machine; ray: the Ray cluster ray.init() "
        "finds ($RAY_ADDRESS), else a new local one; ray://HOST:PORT: a "
        "cluster through Ray Client. Needs kernelkiln[ray] (--cluster).",
    )
    cpus_per_device: int | None = Field(
        None,
        ge=1,
        description="CPU nodes: cores per evaluation device, each a "
        "core set of its own that its timing is pinned to "
        "(None: all of a node's CPUs, as Ray counts them, "
        "are one device).",
    )
    device: str | None = Field(
        None,
        description="The device kind to judge on when the cluster's nodes differ, as "
        "`kiln optimize --cluster` prints it (e.g. 'cuda: NVIDIA H200'); "
        "None: the most numerous kind. Results of two kinds are never "
        "compared.",
    )

    @field_validator("address")
    @classmethod
    def _known_address(cls, value: str) -> str:
        if value in ("local", "ray") or (value.startswith("ray://") and len(value) > len("ray://")):
            return value
        raise ValueError(f"--cluster {value!r}: give local, ray or ray://HOST:PORT")


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

    policy: PolicyName = Field(
        "tuner",
        description="tuner: offline knob search of the seed candidate (no network); "
        "llm: a model writes whole candidates (needs `llm`); replay: "
        "the llm policy answered offline by a recorded session "
        "(needs `replay`).",
    )
    agents: int = Field(1, ge=1, le=8, description="Agents per task, each with a different eligible strategy lens.")
    budget: int = Field(30, ge=1, description="Evaluations per task, shared by its agents (ATU's turn budget).")
    max_tokens: int | None = Field(
        None, ge=1, description="Stop starting new turns once the run's prompt plus completion tokens reach this."
    )
    max_wall_s: float | None = Field(
        None, gt=0, description="Stop starting new turns after this many seconds (counted afresh when a run resumes)."
    )
    r_draft: int = Field(
        5,
        ge=1,
        description="Plateau length (ACCEPT/REVERT since the last KEEP) at which an agent "
        "drafts: it abandons local tuning and changes strategy.",
    )
    platform: Literal["cpu", "cuda"] = Field(
        "cpu", description="Where candidates run and are timed; the task's seed for this platform starts the search."
    )
    seed_file: str | None = Field(
        None,
        description="A candidate file every agent starts from, instead of the task's "
        "KILN seed or the generated one (--seed FILE; one task per run).",
    )
    start_from_seed: bool = Field(
        True,
        description="Agents start from a seed: seed_file, else the task's KILN seed "
        "for the platform, else (cpu) the candidate `kiln seed` generates "
        "from the reference's operations. False (--no-seed): llm agents "
        "write their first candidate from scratch.",
    )
    seed: int = Field(
        0,
        ge=0,
        description="Seed of the tuner's random moves (its sampler, drafting jumps, untried "
        "settings): benchmark repeats use 0, 1, 2, … for independent trajectories.",
    )
    search: Literal["tpe", "enumerate", "random"] = Field(
        "tpe",
        description="How the tuner searches the knobs after memory's settings: tpe: Optuna's TPE sampler, "
        "told every attempt's rank and the trials memory lends, so values that measured slow are tried less; "
        "enumerate: single-knob moves from the working settings, then untried settings at random (the earlier "
        "search); random: best-of-N, the seed then untried settings uniformly at random, no memory (the floor "
        "`kiln ablate` measures every search against).",
    )
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
    llm: LLMConfig | None = Field(None, description="The model endpoint (llm policy only).")
    record: str | None = Field(
        None,
        description="A directory where every exchange with the model is saved "
        "(request, reply, usage, latency), one JSON-lines stream per task "
        "and agent, for `--policy replay` (llm and replay policies).",
    )
    replay: str | None = Field(
        None,
        description="The recorded session (a `record` directory) the replay policy "
        "answers from; its model settings replace `llm`.",
    )
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
        return cls.model_validate(_moved(data))

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
    def _llm_needs_endpoint(self) -> OptimizeConfig:
        if self.policy == "llm" and self.llm is None:
            raise ValueError("the llm policy needs a model: --model NAME (and --base-url URL for a local server)")
        return self

    @model_validator(mode="after")
    def _sessions_follow_the_policy(self) -> OptimizeConfig:
        if self.policy == "replay" and not self.replay:
            raise ValueError("the replay policy needs a recorded session: --replay DIR (made with --record DIR)")
        if self.replay and self.policy != "replay":
            raise ValueError("--replay DIR is read by the replay policy: add --policy replay")
        if self.record and self.policy == "tuner":
            raise ValueError("--record saves the model's exchanges: the tuner calls no model (use --policy llm)")
        if self.record and self.replay and Path(self.record).resolve() == Path(self.replay).resolve():
            raise ValueError("--record and --replay name the same directory: record the replay elsewhere")
        return self

    @model_validator(mode="after")
    def _tuner_needs_a_seed(self) -> OptimizeConfig:
        if self.policy == "tuner" and not self.start_from_seed:
            raise ValueError("--no-seed: the tuner searches a seed candidate's knobs and needs one (use --policy llm)")
        if self.seed_file and not self.start_from_seed:
            raise ValueError("--seed FILE and --no-seed contradict each other: give one")
        return self

    @model_validator(mode="after")
    def _isolation_follows_the_policy(self) -> OptimizeConfig:
        # The tuner rewrites seeds the user installed; a model's code is untrusted: strict unless set.
        if self.policy == "tuner" and "isolation" not in self.guard.model_fields_set:
            self.guard = self.guard.model_copy(update={"isolation": "best-effort"})
        return self

    @model_validator(mode="after")
    def _guard_on_the_run_platform(self) -> OptimizeConfig:
        if self.guard.platform != self.platform:  # the run's platform decides where candidates are judged
            if "platform" in self.guard.model_fields_set:
                raise ValueError(f"guard.platform follows platform: set platform = {self.guard.platform!r} instead")
            self.guard = self.guard.model_copy(update={"platform": self.platform})
        return self


def _moved(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the keys of earlier versions moved to their one home (or dropped)."""
    out = copy.deepcopy(data)
    for old, new in _MOVED.items():
        *parents, leaf = old
        node: Any = out
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict) or leaf not in node:
            continue
        value = node.pop(leaf)
        if new is not None:  # both capped what was shown: the smaller one was in effect
            section, name = new
            table = out.setdefault(section, {})
            table[name] = min(value, table.get(name, value))
    return out
