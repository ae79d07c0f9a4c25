"""Utility-gated consolidation (UGC): resident rules chosen under a token budget.

A candidate has Q > 0, ≥ min_adoptions adoptions over ≥ min_tasks distinct tasks; its
rule shares its id and Q. Priority π = Q·f/ℓ (ℓ = the rule's tokens). f is the cold
frequency (retrievals / eligible stages) for a non-resident rule and, once resident, an
EMA f ← (1−β)·f + β·[used this stage]. The resident set is rebuilt from empty in π
order, adding what fits the budget and skipping what does not; evicted rules return to
retrieval, nothing is deleted.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from typing import cast

from sqlalchemy.engine import Connection

from kernelkiln.memory.config import RulesConfig
from kernelkiln.memory.tokens import TokenCounter, estimate_tokens
from kernelkiln.store.records import Experience, Rule
from kernelkiln.store.store import Store


def priority(q: float, frequency: float, tokens: int) -> float:
    """π = Q·f/ℓ."""
    return q * frequency / max(tokens, 1)


def cold_frequency(retrievals: int, eligible_stages: int) -> float:
    """Retrievals per eligible stage (0 before any stage), at most 1."""
    return min(1.0, retrievals / eligible_stages) if eligible_stages > 0 else 0.0


def faded_frequency(frequency: float, used: bool, beta: float) -> float:
    """One stage of the resident EMA: f ← (1−β)·f + β·[used]."""
    return (1.0 - beta) * frequency + beta * (1.0 if used else 0.0)


def select_resident(candidates: Iterable[tuple[str, float, int]], budget: int) -> list[str]:
    """Ids chosen from (id, π, tokens) in π order, adding what fits ``budget``, skipping the rest."""
    chosen, used = [], 0
    for rule_id, _pi, tokens in sorted(candidates, key=lambda c: (-c[1], c[0])):
        if used + tokens <= budget:
            chosen.append(rule_id)
            used += tokens
    return chosen


_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def distill(experience: Experience, max_chars: int) -> str:
    """A concise rule: the summary if there is one, else whole leading sentences up to ``max_chars``."""
    text = experience.summary.strip() or " ".join(experience.text.split())
    if len(text) <= max_chars:
        return text
    rule = ""
    for sentence in _SENTENCE_END.split(text):
        if len(rule) + len(sentence) + 1 > max_chars:
            break
        rule = f"{rule} {sentence}".strip()
    return rule or text[: max_chars - 1] + "…"


class Consolidator:
    """Keeps the store's resident set in line with UGC after every stage."""

    def __init__(self, store: Store, config: RulesConfig | None = None, tokens: TokenCounter = estimate_tokens):
        self.store = store
        self.config = config or RulesConfig()
        self.tokens = tokens

    def fade(self, conn: Connection, used: set[str]) -> None:
        """Apply one stage's EMA to every resident rule (``used``: ids adopted this stage)."""
        for rule in self.store.rules.list(conn, resident=True):
            self.store.rules.update(
                conn, rule.id, frequency=faded_frequency(rule.frequency, rule.id in used, self.config.beta)
            )

    def rebuild(self, conn: Connection) -> list[str]:
        """Recompute the resident set from empty; returns the resident ids in π order."""
        store, config = self.store, self.config
        candidates = store.experiences.consolidation_candidates(conn, config.min_adoptions, config.min_tasks)
        rules = {r.id: r for r in store.rules.list(conn)}
        scored, cold = [], {}
        for exp in candidates:
            rule = rules.get(exp.id)
            if rule is None:
                text = distill(exp, config.rule_chars)
                rule = store.rules.upsert(conn, Rule(id=exp.id, text=text, tokens=self.tokens(text)))
                rules[exp.id] = rule
            cold[exp.id] = cold_frequency(exp.retrievals, store.stages.count_since(conn, exp.born_stage))
            frequency = rule.frequency if rule.resident else cold[exp.id]
            scored.append((exp.id, priority(exp.q, frequency, rule.tokens), rule.tokens))
        chosen = select_resident(scored, config.budget_tokens)
        if config.selection == "random":
            chosen = self._random(conn, len(chosen), rules)
        chosen_set = set(chosen)
        for rule in rules.values():
            resident = rule.id in chosen_set
            if resident != rule.resident:
                extra = {"frequency": cold.get(rule.id, 0.0)} if resident else {}
                store.rules.update(conn, rule.id, resident=resident, **extra)
                store.experiences.update(conn, rule.id, resident=resident)
        return chosen

    def _random(self, conn: Connection, count: int, rules: dict[str, Rule]) -> list[str]:
        """``count`` rules drawn at random from every stored experience (seeded by the stage count), within budget."""
        pool = sorted(e.id for e in self.store.experiences.list(conn, kind="experience"))
        random.Random(self.store.stages.last_id(conn)).shuffle(pool)
        chosen: list[str] = []
        used = 0
        for exp_id in pool:
            if len(chosen) >= count:
                break
            rule = rules.get(exp_id)
            if rule is None:
                exp = cast(Experience, self.store.experiences.get(conn, exp_id))  # drawn from the stored ones
                text = distill(exp, self.config.rule_chars)
                rule = rules[exp_id] = self.store.rules.upsert(
                    conn, Rule(id=exp_id, text=text, tokens=self.tokens(text))
                )
            if used + rule.tokens <= self.config.budget_tokens:
                chosen.append(exp_id)
                used += rule.tokens
        return chosen
