"""The offline tuner: searches the knobs a seed candidate declares, ordered by memory.

Each turn it proposes one setting of the knobs, as a standalone candidate:
1. the working code itself, the first time it sees it (the seed is evaluated first);
2. settings that resident rules record (``set NAME=value`` conditions), highest Q first:
   they are what memory has proven across tasks; then settings that retrieved experiences
   record: whole configurations first, then single changes, each group in memory's
   ranking. This is how memory makes a later task converge faster; each rule or
   experience applied is recorded as adopted;
3. when drafting (plateau): the other agents' best settings, else a far jump;
4. single-knob moves from the working settings, the lens's knobs first;
5. any untried setting, in a seeded random order, until the space is exhausted.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from kernelkiln.policy.turn import Choice, Proposal, Turn, code_hash
from kernelkiln.store.records import Attempt, Case
from kernelkiln.task import knobs as K

_MAX_ENUMERATED = 4096


@dataclass(frozen=True)
class _Move:
    settings: K.Settings
    kind: str  # seed | rule | experience | draft | neighbour | random
    why: str
    source: str | None = None  # the experience it applies


class Tuner:
    """Knob search for one agent on one task; ``observe`` replays a run to rebuild it."""

    name = "tuner"

    def __init__(self, agent: str, rng_seed: int | str = 0):
        self.agent = agent
        self.rng = random.Random(f"{agent}:{rng_seed}")
        self.tried: dict[str, Attempt] = {}

    def observe(self, attempt: Attempt) -> None:
        if attempt.case.knobs is not None:
            self.tried[K.key(attempt.case.knobs)] = attempt

    def propose(self, turn: Turn) -> Proposal | None:
        knobs = K.read_knobs(turn.code)
        base = K.settings_of(knobs)
        for move in self._moves(turn, knobs, base):
            # The working code's own settings are the working code itself, as written (the same hash).
            code = turn.code if K.key(move.settings) == K.key(base) else K.apply(turn.code, move.settings)
            if K.key(move.settings) in self.tried or code_hash(code) in turn.evaluated:
                continue
            return self._proposal(turn, base, move, code)
        return None

    # -- moves, best first -------------------------------------------------------------
    def _moves(self, turn: Turn, knobs: list[K.Knob], base: K.Settings):
        yield _Move(base, "seed", "evaluate the working code as it is")
        if not knobs:
            return
        options = {k.name: k.options for k in knobs}
        for rule in turn.rule_sources:
            settings = self._from_experience(rule.conditions, options, base)
            if settings is not None:
                yield _Move(settings, "rule", f"apply resident rule {rule.id}", rule.id)
        applicable = []
        for rank, item in enumerate(turn.experiences):
            settings = self._from_experience(item.experience.conditions, options, base)
            if settings is not None:
                applicable.append((-len(item.experience.conditions), rank, settings, item.experience.id))
        # A whole configuration that worked on a similar task first, then single tips, each in memory's order.
        for _, _, settings, exp_id in sorted(applicable, key=lambda a: a[:2]):
            yield _Move(settings, "experience", f"apply {exp_id}", exp_id)
        if turn.objective == "draft":
            yield from self._drafts(turn, options, base)
        ordered = sorted(knobs, key=lambda k: (not turn.lens.prefers(k.name), knobs.index(k)))
        for knob in ordered:
            for value in knob.options:
                if not K.same(value, base[knob.name]):
                    yield _Move({**base, knob.name: value}, "neighbour", f"{knob.name} → {K.show(value)}")
        yield from self._random(options, base)

    @staticmethod
    def _from_experience(conditions: list[str], options: dict, base: K.Settings) -> K.Settings | None:
        """``base`` with the experience's recorded settings, when they all fit this candidate's knobs."""
        wanted = [parsed for c in conditions if (parsed := K.parse_condition(c))]
        if not wanted:
            return None
        settings = dict(base)
        for name, value in wanted:
            if not any(K.same(value, o) for o in options.get(name, ())):
                return None
            settings[name] = value
        return settings if settings != base else None

    def _drafts(self, turn: Turn, options: dict, base: K.Settings):
        for snap in sorted(turn.leaderboard, key=lambda s: -s.speedup):
            try:
                theirs = K.settings_of(K.read_knobs(snap.code))
            except K.KnobError:
                continue
            settings = {**base, **{n: v for n, v in theirs.items() if n in options}}
            if settings != base:
                yield _Move(settings, "draft", f"take agent {snap.agent}'s settings ({snap.speedup:.2f}x)")
        names = list(options)
        for _ in range(32):  # a far jump: change at least half the knobs
            chosen = self.rng.sample(names, max(1, (len(names) + 1) // 2))
            settings = {**base, **{n: self.rng.choice(options[n]) for n in chosen}}
            if settings != base:
                yield _Move(settings, "draft", "jump far from the plateau: " + K.describe(
                    {n: settings[n] for n in chosen}))

    def _random(self, options: dict, base: K.Settings):
        names = list(options)
        combos = list(itertools.islice(itertools.product(*(options[n] for n in names)), _MAX_ENUMERATED))
        self.rng.shuffle(combos)
        for combo in combos:
            yield _Move(dict(zip(names, combo, strict=True)), "random", "an untried setting")

    # -- the proposal ------------------------------------------------------------------
    def _proposal(self, turn: Turn, base: K.Settings, move: _Move, code: str) -> Proposal:
        changed = {n: v for n, v in move.settings.items() if not K.same(v, base.get(n))}
        what = K.describe(changed) if changed else K.describe(move.settings) or "as written"
        summary = f"{'seed' if move.kind == 'seed' else move.kind}: {what}"
        shown = {r.experience.id: r.experience for r in turn.experiences}
        applicable = {e.id: e for e in turn.rule_sources if any(K.parse_condition(c) for c in e.conditions)}
        # Rules are always in context; one is recorded only when it could have been applied here.
        choices = tuple(
            Choice(eid, eid == move.source, "applied its settings" if eid == move.source else self._unused(e, move))
            for eid, e in {**shown, **applicable}.items())
        journal = (f"## Strategy\n{turn.lens.title} lens, {move.kind} move: {move.why}.\n\n"
                   f"## Change\n{what}\n\n## Settings\n{K.describe(move.settings)}\n")
        return Proposal(code=code, summary=summary, parent_id=turn.parent_id, choices=choices, journal=journal,
                        case=Case(knobs=move.settings, changed=changed, move=move.kind))

    @staticmethod
    def _unused(experience, move: _Move) -> str:
        if not any(K.parse_condition(c) for c in experience.conditions):
            return "records no knob settings"
        if move.source is not None:
            return f"{move.source} ranked higher"
        return "its settings do not fit this candidate's knobs or were tried"
