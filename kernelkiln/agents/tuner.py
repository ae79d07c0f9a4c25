"""The offline tuner: searches the knobs a starting candidate declares, memory's settings first.

Each turn it proposes one setting of the knobs, as a standalone candidate:
1. what memory lends (``Turn.prior``): the best of a stored task that matches this one
   exactly, which one evaluation confirms; then the best settings of the nearest stored
   tasks, nearest first;
2. the seed (the task's starting code, ``Turn.origin``), once, even when a KEEP on memory's starting
   point has already moved the working code on (a generated starting candidate is often the best there is);
3. settings that resident rules record (``set NAME=value`` conditions), highest Q first; then
   settings that retrieved experiences record, whole configurations first, then single changes,
   each group in memory's ranking. Each rule or experience applied is recorded as adopted;
4. when drafting (plateau): the other agents' best settings, else a far jump;
5. the search (``search``):
   - ``tpe`` (default): Optuna's multivariate TPE sampler (``sampler.Study``), told every
     observed attempt, whatever proposed it, the other agents' (``Turn.peers``, when the board is
     shared) and what memory lends (an exact match's trials, the neighbours' trials by rank).
     A suggestion already tried is told its value (the median, when another agent of the run
     evaluated it) and the sampler asked again, a few times, then any untried setting in a seeded
     random order;
   - ``enumerate`` (the earlier search): single-knob moves from the working settings, the lens's
     knobs first, then untried settings in a seeded random order;
   - ``random``: best-of-N, the floor every search must beat: the seed, then untried settings
     uniformly at random; memory and the set-aside rule are not used.
A knob value *set aside* (every evaluation of it on this task lost, ``loss_evidence`` or more;
or a trap memory lends) is not proposed while an untried setting without such a value remains.
Nothing tried (by this agent, by the run, or by an exact match) is proposed again; None once the
space is exhausted. Every random draw is seeded by the agent's seed and how many attempts it has
observed, so ``observe``-ing a run's attempts (``--resume``) continues the search where it stopped.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import random
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from kernelkiln.agents.sampler import Study
from kernelkiln.memory.prior import Prior, contest
from kernelkiln.policy.turn import Choice, Proposal, Turn, code_hash
from kernelkiln.store.records import Attempt, Case
from kernelkiln.task import knobs as K

Search = Literal["tpe", "enumerate", "random"]

_MAX_ENUMERATED = 4096
_ASKS = 16  # suggestions of tried or set-aside settings the sampler may make before an untried random one is taken
_FREE = frozenset({"seed", "reuse", "late"})  # moves the set-aside rule does not hold back
_SEARCH = frozenset({"neighbour", "sampled", "random", "late"})  # moves of the search itself, not of memory


@functools.lru_cache(maxsize=4096)
def _values_of_key(key: str) -> frozenset[K.Value]:
    """The knob values of the settings ``key`` names, parsed once: a replay projects every move onto them."""
    return frozenset(K.values_of(json.loads(key)))


@dataclass(frozen=True)
class _Move:
    settings: K.Settings
    kind: str  # reuse | transfer | seed | rule | experience | draft | neighbour | sampled | random | late
    why: str
    source: str | None = None  # the experience it applies


class Tuner:
    """Knob search for one agent on one task; ``observe`` replays a run to rebuild it."""

    name = "tuner"
    layered = False  # it orders knob moves by memory's prior, experiences and rules; the rest is prompt text

    def __init__(self, agent: str, rng_seed: int | str = 0, search: Search = "tpe"):
        self.agent, self.search = agent, search
        self._seed = f"{agent}:{rng_seed}"
        self.tried: dict[str, Attempt] = {}
        self.rng = random.Random(self._seed)
        self._sampler_seed = random.Random(f"{self._seed}:tpe").getrandbits(31)

    def observe(self, attempt: Attempt) -> None:
        if attempt.case.knobs is not None:
            self.tried[K.key(attempt.case.knobs)] = attempt

    def propose(self, turn: Turn) -> Proposal | None:
        knobs = K.read_knobs(turn.code)
        base = K.settings_of(knobs)
        self.rng = random.Random(f"{self._seed}:{len(self.tried)}")  # reproducible on resume
        prior = turn.prior if self.search != "random" else Prior()
        known = {K.key(t.settings) for t in prior.known}
        aside = self.set_aside(prior) if self.search != "random" else frozenset()
        for move in self._moves(turn, knobs, base, prior, aside):
            judged = self._judgeable(turn, move, known)
            code = self._untried(turn, base, judged, known, aside) if judged is not None else None
            if code is not None and judged is not None:
                return self._proposal(turn, base, judged, code, {k.name: k.options for k in knobs})
        return None

    def set_aside(self, prior: Prior) -> frozenset[K.Value]:
        """Knob values not proposed while the untried rest of the space lasts: this task's losers and memory's traps."""
        outcomes = [
            (a.case.knobs, contest(a.verdict, a.case), a.speedup if self._measured(a) else None)
            for a in self.tried.values()
            if a.case.knobs
        ]
        return K.losing_values(outcomes, prior.loss_evidence) | prior.traps

    def _judgeable(self, turn: Turn, move: _Move, known: set[str]) -> _Move | None:
        """``move``, or where the pool judges only some settings (a replay of a sampled space), the measured one
        that shares the most knob values with it (TenSet's rule: search the measured sample only). A search move
        takes the nearest untried one (None once every one was tried); a move that lends one configuration (a
        neighbour's best, an experience, a rule, a draft) takes the nearest of all, ties in an order fixed by the
        move itself, and is spent once that one was tried: else each new evaluation would project the same move
        onto the next nearest setting, and one neighbour's best would fill the budget with transfers."""
        if turn.judgeable is None or K.key(move.settings) in turn.judgeable:
            return move
        search = move.kind in _SEARCH
        pool = sorted(k for k in turn.judgeable if not search or (k not in self.tried and k not in known))
        if not pool:
            return None
        (self.rng if search else random.Random(K.key(move.settings))).shuffle(pool)  # ties in a seeded order
        wanted = K.values_of(move.settings)
        nearest = max(pool, key=lambda k: len(_values_of_key(k) & wanted))
        return _Move(json.loads(nearest), move.kind, f"{move.why} (the nearest measured setting)", move.source)

    def _untried(
        self, turn: Turn, base: K.Settings, move: _Move, known: set[str], aside: frozenset[K.Value]
    ) -> str | None:
        """The candidate for ``move``, or None when it was tried (or is known) or holds a value set aside."""
        settings = move.settings
        key = K.key(settings)
        if key in self.tried or (key in known and move.kind != "reuse"):
            return None
        if move.kind not in _FREE and K.values_of(settings) & aside:
            return None
        # The working code's own settings are the working code itself, as written (the same hash).
        code = turn.code if key == K.key(base) else K.apply(turn.code, settings)
        return None if code_hash(code) in turn.evaluated else code

    # -- moves, best first -------------------------------------------------------------
    def _moves(
        self, turn: Turn, knobs: list[K.Knob], base: K.Settings, prior: Prior, aside: frozenset[K.Value]
    ) -> Iterator[_Move]:
        options = {k.name: k.options for k in knobs}
        # Memory's starting points come first, once: before any move of the agent's own (the seed's too, unless
        # seed_first puts it before the neighbours' bests).
        first = ("reuse", "transfer", "seed") if prior.start_first else ("reuse", "transfer")
        starting = all(a.case.move in first for a in self.tried.values())
        if starting and prior.reuse is not None and (settings := self._fit(prior.reuse, options, base)) is not None:
            yield _Move(settings, "reuse", f"the best of {prior.reused_from}, which matches this task exactly")
        origin = K.settings_of(K.read_knobs(turn.origin)) if turn.origin else base
        start = _Move(self._fit(origin, options, base) or base, "seed", "evaluate the seed as it is")
        if prior.start_first:
            yield start
        for n in prior.neighbours if starting else ():
            if n.best is not None and (settings := self._fit(n.best, options, base, partial=True)) is not None:
                yield _Move(
                    settings,
                    "transfer",
                    f"the best of {n.task_id} ({n.best_speedup:.2f}x there), "
                    f"a stored task at distance {n.distance:.2f}",
                )
        # The seed: the task's starting code, which a KEEP on memory's starting point has left behind.
        yield start
        if not knobs:
            return
        if self.search == "random":
            yield from self._random(turn, options, "random")
            return
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
        if self.search == "tpe":
            yield from self._sampled(turn, options, base, prior, aside)
        else:
            yield from self._neighbours(turn, knobs, base)
        yield from self._random(turn, options, "random")
        if aside:  # every untried setting left holds a value set aside: try them now
            yield from self._random(turn, options, "late")

    @staticmethod
    def _fit(wanted: K.Settings, options: dict, base: K.Settings, partial: bool = False) -> K.Settings | None:
        """``base`` with ``wanted``'s values for the knobs both have; None when a value is not an option here
        (``partial``: such knobs keep the base's value) or nothing would change."""
        settings = dict(base)
        for name, value in wanted.items():
            if name not in options:
                continue
            if any(K.same(value, o) for o in options[name]):
                settings[name] = value
            elif not partial:
                return None
        return None if partial and settings == base else settings

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

    def _drafts(self, turn: Turn, options: dict, base: K.Settings) -> Iterator[_Move]:
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
                yield _Move(
                    settings, "draft", "jump far from the plateau: " + K.describe({n: settings[n] for n in chosen})
                )

    def _neighbours(self, turn: Turn, knobs: list[K.Knob], base: K.Settings) -> Iterator[_Move]:
        ordered = sorted(knobs, key=lambda k: (not turn.lens.prefers(k.name), knobs.index(k)))
        for knob in ordered:
            for value in knob.options:
                if not K.same(value, base[knob.name]):
                    yield _Move({**base, knob.name: value}, "neighbour", f"{knob.name} → {K.show(value)}")

    def _random(self, turn: Turn, options: dict, kind: str) -> Iterator[_Move]:
        """Untried settings in a seeded random order; where the pool judges only some (a replay of a sampled
        space), those, uniformly: random search over the measured sample, as TenSet's rule has it."""
        names = list(options)
        rng = random.Random(f"{self._seed}:{len(self.tried)}:{kind}")
        why = (
            "an untried setting" if kind == "random" else "an untried setting (every one left holds a value set aside)"
        )
        if turn.judgeable is not None:
            measured = sorted(k for k in turn.judgeable if k not in self.tried)
            rng.shuffle(measured)
            for k in measured:
                yield _Move(json.loads(k), kind, why)
            return
        combos = list(itertools.islice(itertools.product(*(options[n] for n in names)), _MAX_ENUMERATED))
        rng.shuffle(combos)
        for combo in combos:
            yield _Move(dict(zip(names, combo, strict=True)), kind, why)
        if math.prod(len(o) for o in options.values()) > _MAX_ENUMERATED:
            for _ in range(_MAX_ENUMERATED):  # beyond what is listed, random draws
                yield _Move({n: rng.choice(o) for n, o in options.items()}, kind, why)

    # -- the sampler -------------------------------------------------------------------
    def _sampled(
        self, turn: Turn, options: dict, base: K.Settings, prior: Prior, aside: frozenset[K.Value]
    ) -> Iterator[_Move]:
        """TPE's suggestion given every observed attempt and what memory lends; a tried or set-aside one is told
        its value (set-aside: below every measured one) and the sampler asked again."""
        own = [
            (a.case.knobs, a.speedup if self._measured(a) else None)
            for a in [*self.tried.values(), *turn.peers]
            if a.case.knobs
        ]
        own += [(t.settings, t.speedup) for t in prior.known]
        lent = [t for n in prior.neighbours for t in n.trials]
        study = Study(options, base, own, lent, self._sampler_seed + len(self.tried))
        neutral = statistics.median(study.values.values()) if study.values else 0.5
        known = {K.key(t.settings) for t in prior.known}
        for _ in range(_ASKS):
            trial, settings = study.ask()
            # Where the pool judges a sample only, the suggestion is judged as the measured setting it becomes.
            move = self._judgeable(
                turn, _Move({**base, **settings}, "sampled", "TPE's suggestion given the attempts so far"), known
            )
            if move is None:
                return  # every measured setting was tried
            if self._untried(turn, base, move, known, aside) is not None:
                yield move
                return
            held_back = bool(K.values_of(move.settings) & aside) and K.key(move.settings) not in study.values
            study.tell(trial, -2.0 if held_back else study.values.get(K.key(move.settings), neutral))

    @staticmethod
    def _measured(attempt: Attempt) -> bool:
        return attempt.verdict != "REJECT" and attempt.speedup is not None and attempt.speedup > 0

    # -- the proposal ------------------------------------------------------------------
    def _proposal(self, turn: Turn, base: K.Settings, move: _Move, code: str, options: dict) -> Proposal:
        changed = {n: v for n, v in move.settings.items() if not K.same(v, base.get(n))}
        what = K.describe(changed) if changed else K.describe(move.settings) or "as written"
        summary = f"{'seed' if move.kind == 'seed' else move.kind}: {what}"
        shown = {r.experience.id: r.experience for r in turn.experiences}
        applicable = {e.id: e for e in turn.rule_sources if any(K.parse_condition(c) for c in e.conditions)}
        key = K.key(move.settings)

        def choice(eid: str, experience) -> Choice:
            if eid == move.source:
                return Choice(eid, True, "applied its settings")
            # Memory's prior (an exact match, a neighbour's best) may propose exactly what a lesson says: its advice
            # was followed, so it shares the stage's credit instead of a penalty for being left unused.
            recommended = self._from_experience(experience.conditions, options, base)
            if recommended is not None and K.key(recommended) == key and move.kind in ("reuse", "transfer"):
                return Choice(eid, True, f"this candidate is what it recommends ({move.kind} move)")
            return Choice(eid, False, self._unused(experience, move))

        # Rules are always in context; one is recorded only when it could have been applied here.
        choices = tuple(choice(eid, e) for eid, e in {**shown, **applicable}.items())
        journal = (
            f"## Strategy\n{turn.lens.title} lens, {move.kind} move: {move.why}.\n\n"
            f"## Change\n{what}\n\n## Settings\n{K.describe(move.settings)}\n"
        )
        return Proposal(
            code=code,
            summary=summary,
            parent_id=turn.parent_id,
            choices=choices,
            journal=journal,
            case=Case(knobs=move.settings, changed=changed, move=move.kind),
        )

    @staticmethod
    def _unused(experience, move: _Move) -> str:
        if not any(K.parse_condition(c) for c in experience.conditions):
            return "records no knob settings"
        if move.source is not None:
            return f"{move.source} ranked higher"
        return "its settings do not fit this candidate's knobs or were tried"
