"""Adoption-traced utility (ATU): stage scores, feedback and the update of Q.

Stage score s: correctness passed → 1; optimization improved → 1 − t_best/t_first_correct;
failed or no improvement → −η. Feedback: each adopted experience gets s/|A|, each retrieved
but unadopted one −η (with ``credit="uniform"``, the ablation baseline, every retrieved
one gets s whatever the agent adopted). Update: Q ← (1−α)·Q + α·f, α = max(1/n, α_floor), n the
experience's stage-deduplicated retrieval count; Q stays within [−η, 1].
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from sqlalchemy.engine import Connection

from kernelkiln.memory.config import ValueConfig
from kernelkiln.store.store import Store


class StageFeedback(Protocol):
    """What a stage's value update reads of a closed stage (a ``StageOutcome``)."""

    @property
    def score(self) -> float: ...
    @property
    def retrieved(self) -> frozenset[str]: ...
    @property
    def adopted(self) -> frozenset[str]: ...


def correctness_score(passed: bool, eta: float) -> float:
    """s of a correctness stage."""
    return 1.0 if passed else -eta


def optimization_score(t_first_correct: float | None, t_best: float | None, eta: float) -> float:
    """s of an optimization stage: the fraction of time saved, or −η without improvement."""
    if not t_first_correct or t_best is None or t_best >= t_first_correct:
        return -eta
    return 1.0 - t_best / t_first_correct


def stage_feedback(
    score: float, retrieved: Iterable[str], adopted: Iterable[str], eta: float, credit: str = "adopted"
) -> dict[str, float]:
    """f for every experience of a stage: adopted share s, unadopted retrieved ones get −η.

    ``credit="uniform"`` gives every experience of the stage s instead, adopted or not.
    """
    adopted_set = set(adopted)
    if credit == "uniform":
        return {eid: score for eid in set(retrieved) | adopted_set}
    feedback = {eid: -eta for eid in set(retrieved) - adopted_set}
    for eid in adopted_set:
        feedback[eid] = score / len(adopted_set)
    return feedback


def learning_rate(n: int, alpha_floor: float) -> float:
    """α = max(1/n, α_floor) for an experience retrieved in n stages."""
    return max(1.0 / max(n, 1), alpha_floor)


def updated_value(q: float, feedback: float, n: int, config: ValueConfig) -> float:
    """Q after one stage's feedback, clamped to [−η, 1]."""
    alpha = learning_rate(n, config.alpha_floor)
    q = (1.0 - alpha) * q + alpha * feedback
    return min(1.0, max(-config.eta, q))


def apply_stage_values(conn: Connection, store: Store, outcome: StageFeedback, config: ValueConfig) -> dict[str, float]:
    """Write one closed stage's feedback into the store; returns the new Q per experience.

    Locks the experiences' rows first, so concurrent writers never lose an update. Each
    experience's stage-deduplicated retrieval count rises by one (and its adoption count
    when adopted); its distinct-task count is recounted from the adoption records.
    A resident rule is in context without being retrieved: it shares the stage's reward
    when adopted, and is left alone (its frequency fades instead) when not.
    """
    feedback = stage_feedback(outcome.score, outcome.retrieved, outcome.adopted, config.eta, config.credit)
    experiences = store.experiences.get_many(conn, list(feedback), for_update=True)
    experiences = {eid: e for eid, e in experiences.items() if eid in outcome.adopted or not e.resident}
    tasks = store.adoptions.distinct_tasks(conn, list(experiences))
    values: dict[str, float] = {}
    for eid, exp in experiences.items():
        n = exp.retrievals + 1
        values[eid] = updated_value(exp.q, feedback[eid], n, config)
        store.experiences.update(
            conn,
            eid,
            q=values[eid],
            retrievals=n,
            adoptions=exp.adoptions + (1 if eid in outcome.adopted else 0),
            distinct_tasks=tasks.get(eid, 0),
        )
    return values
