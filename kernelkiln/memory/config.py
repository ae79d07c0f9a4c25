"""Configuration of memory: every formula's constants and defaults (docs/architecture.md § The formulas)."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, PrivateAttr

from kernelkiln.store.records import SUMMARY_CHARS


class GraphConfig(BaseModel):
    """Graph score d(v) = w_self·r_v + w_succ·γ·Σ_{u∈succ(v)} d(u)."""

    model_config = ConfigDict(extra="forbid")

    w_self: float = Field(default=1.0, description="Weight of the node's own relative speedup r_v.")
    w_succ: float = Field(default=0.5, description="Weight of the successors' scores.")
    gamma: float = Field(default=0.9, ge=0, le=1, description="Discount γ on successors' scores.")


class ValueConfig(BaseModel):
    """Adoption-traced utility (ATU): stage scores and the update of Q."""

    model_config = ConfigDict(extra="forbid")

    eta: float = Field(
        default=0.2,
        gt=0,
        description="η: score of a failed or unimproved stage is −η; unadopted experiences get −η; Q's floor is −η.",
    )
    alpha_floor: float = Field(
        default=0.05, gt=0, le=1, description="Least weight of new evidence: α = max(1/n, alpha_floor)."
    )
    credit: Literal["adopted", "uniform"] = Field(
        default="adopted",
        description="adopted: ATU, a stage's score shared by the experiences the agent adopted, -η for the rest "
        "it was shown; uniform: every retrieved experience gets the stage's score (`kiln ablate`'s baseline).",
    )
    # Not a field: the run's budget (OptimizeConfig.budget) is the one place a user sets it.
    _turn_budget: int | None = PrivateAttr(default=None)

    @property
    def turn_budget(self) -> int | None:
        """Attempts after which an agent's stage closes; None (outside a run): only when the task ends."""
        return self._turn_budget

    def with_turn_budget(self, budget: int | None) -> ValueConfig:
        """This configuration with the run's turn budget."""
        copy = self.model_copy()
        copy._turn_budget = budget
        return copy


class RetrievalConfig(BaseModel):
    """Relevance pool, value re-ranking and graph blending."""

    model_config = ConfigDict(extra="forbid")

    pool_size: int = Field(default=20, ge=1, description="K: the relevance pool (full-text top K).")
    lam: float = Field(default=0.5, ge=0, description="λ in relevance·(1 + λ·Q).")
    graph_weight: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="Share of the final score taken by the source attempt's graph score d(v) "
        "(both normalized to the pool's maximum); 0 ranks by value alone.",
    )
    postings_budget: int = Field(
        default=4000,
        ge=1,
        description="SQLite: a query keeps its rarest words while their document counts sum to at most "
        "this (one word at least), bounding the documents BM25 must rank.",
    )


class RulesConfig(BaseModel):
    """Utility-gated consolidation (UGC) into resident rules."""

    model_config = ConfigDict(extra="forbid")

    min_adoptions: int = Field(default=3, ge=1, description="Adoptions an experience needs to become a rule.")
    min_tasks: int = Field(default=3, ge=1, description="Distinct tasks those adoptions must span.")
    beta: float = Field(default=0.1, gt=0, le=1, description="β: EMA rate of a resident rule's frequency.")
    budget_tokens: int = Field(default=10_000, ge=0, description="Token budget of the resident set.")
    rule_chars: int = Field(default=400, ge=40, description="Longest rule text distilled from an experience.")
    selection: Literal["utility", "random"] = Field(
        default="utility",
        description="utility: UGC, the candidates in π order; random: as many rules as UGC would choose, drawn at "
        "random from every stored experience (`kiln ablate`'s control for the rules study).",
    )


class BoardConfig(BaseModel):
    """The conclusions-only shared board."""

    model_config = ConfigDict(extra="forbid")

    summary_chars: int = Field(default=SUMMARY_CHARS, ge=20, le=SUMMARY_CHARS, description="Cap on an entry's summary.")
    reflection_chars: int = Field(default=1200, ge=0, description="Cap on an entry's reflection.")
    horizon: int = Field(default=16, ge=1, description="H: entries kept per task (the latest H).")
    auto_post: bool = Field(
        default=True,
        description="Post a win for every KEEP and a trap for every REJECT when a batch is recorded.",
    )
    shared: bool = Field(
        default=True,
        description="Agents of a task see each other's conclusions: their board entries, their best snapshots when "
        "drafting, the lessons their wins left, and (the tuner) their trials. False: each agent sees only its own "
        "(`kiln ablate`'s private arm of the agents study).",
    )


class TransferConfig(BaseModel):
    """What stored tasks lend a new one's knob search (memory/prior.py)."""

    model_config = ConfigDict(extra="forbid")

    exact: bool = Field(
        default=True,
        description="A task whose signature matches a stored task's exactly (seed code, machine, compiler) starts "
        "from that task's best, and the settings it tried are not tried again (MetaSchedule's database).",
    )
    neighbours: int = Field(
        default=3,
        ge=0,
        description="Nearest stored tasks (same platform and machine; family, knob names and sizes decide) whose "
        "best settings are tried first, whose trials warm-start the sampler by rank and whose losing knob values "
        "are tried last; 0 turns transfer off.",
    )
    similarity: Literal["nearest", "none"] = Field(
        default="nearest",
        description="nearest: the neighbours are the nearest stored tasks, nearest first; none: the generic "
        "portfolio, a control for transfer: the stored tasks (any distance) whose bests are the fastest "
        "anywhere, fastest first, so what is lent is the globally best configurations, not the similar tasks' "
        "(`kiln ablate --study held-out`).",
    )
    start_first: Literal["never", "generated", "always"] = Field(
        default="generated",
        validation_alias=AliasChoices("start_first", "seed_first"),  # seed_first: its earlier name
        description="When the task's starting candidate is evaluated before the neighbours' bests (an exact match's "
        "best still comes first): never, always, or when it was generated from the reference (`kiln lower`: tuned "
        "defaults, often the best there is, so every neighbour tried before it is an evaluation lost; held out over 34 "
        "measured tasks, 0.81 [0.70, 0.93] of the evaluations to 95% that an empty store needs, against 1.00 with "
        "never: docs/guide/spaces.md).",
    )
    max_distance: float = Field(
        default=1.5,
        ge=0,
        description="Farthest a neighbour may be (another family adds 1, disjoint knobs 1, each factor of 2 in "
        "the work 0.1).",
    )
    loss_evidence: int = Field(
        default=3,
        ge=1,
        description="Evaluations that held a knob value, every one lost (REVERT or REJECT below the median figure), "
        "before the value is set aside: on the task itself it is proposed again only after the untried rest of the "
        "space; pooled over the neighbours that tried it, it is a trap.",
    )
    trap_tasks: int = Field(
        default=2,
        ge=1,
        description="Neighbours a knob value must have lost on (every evaluation of it there) before it is a trap, "
        "set aside from a task's first evaluation.",
    )


class PruneConfig(BaseModel):
    """What ``kiln memory prune`` removes besides board entries beyond the horizon."""

    model_config = ConfigDict(extra="forbid")

    min_retrievals: int = Field(
        default=10,
        ge=1,
        description="An experience retrieved in at least this many stages, never adopted, whose Q "
        "has sunk to the floor −η, is pruned.",
    )


class MemoryConfig(BaseModel):
    """All of memory's settings."""

    model_config = ConfigDict(extra="forbid")

    graph: GraphConfig = Field(default_factory=GraphConfig, description="Experience graph score.")
    value: ValueConfig = Field(default_factory=ValueConfig, description="Adoption-traced values.")
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig, description="Retrieval and ranking.")
    rules: RulesConfig = Field(default_factory=RulesConfig, description="Resident rules.")
    board: BoardConfig = Field(default_factory=BoardConfig, description="Shared board.")
    transfer: TransferConfig = Field(default_factory=TransferConfig, description="Exact reuse and transfer.")
    readonly: bool = Field(
        default=False,
        description="Lend the store's memory read-only (--memory-readonly): experiences, rules and what stored tasks "
        "teach are applied; the store is opened read-only and nothing is written to it, nor learned; the run's own "
        "records go to a private store, readonly.db in the output folder (--out, else kiln-runs), where --resume "
        "finds them.",
    )
    prune: PruneConfig = Field(default_factory=PruneConfig, description="Pruning.")
