"""The offline tuner: searches the knobs a seed candidate declares, memory's settings first.

Each turn it proposes one setting of the knobs, as a standalone candidate:
1. the working code itself, the first time it sees it (the seed is evaluated first);
2. settings that resident rules record (``set NAME=value`` conditions), highest Q first:
   they are what memory has proven across tasks; then settings that retrieved experiences
   record: whole configurations first, then single changes, each group in memory's
   ranking. This is how memory makes a later task converge faster; each rule or
   experience applied is recorded as adopted;
3. when drafting (plateau): the other agents' best settings, else a far jump;
4. the search (``search``):
   - ``tpe`` (default): Optuna's multivariate TPE sampler over the knobs (each a categorical
     of its options' indices), seeded from the agent's seed. Every observed attempt, whatever
     proposed it, is a trial of the study, valued by the log of its speedup (a failed one
     below every measured one), so values that measured slow are tried less often. A
     suggestion already tried is told its value (the median of the values, when another agent
     of the run evaluated it) and the sampler asked again, a few times, then any untried
     setting in a seeded random order;
   - ``enumerate`` (the earlier search, kept for ``kiln ablate --study search``): single-knob
     moves from the working settings, the lens's knobs first, then any untried setting in a
     seeded random order.
Nothing tried (by this agent, or evaluated by the run) is proposed again; None once the space
is exhausted. The study is the observed attempts, told in order, and every random draw is
seeded by the agent's seed and how many attempts it has observed, so ``observe``-ing a run's
attempts (``--resume``) continues the search exactly where it stopped (the study is rebuilt
each turn: tens of milliseconds for a few dozen attempts).
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kernelkiln.policy.turn import Choice, Proposal, Turn, code_hash
from kernelkiln.store.records import Attempt, Case
from kernelkiln.task import knobs as K

if TYPE_CHECKING:
    import optuna

Search = Literal["tpe", "enumerate"]

_MAX_ENUMERATED = 4096
_ASKS = 16  # suggestions of tried settings the sampler may make before an untried random one is taken
_STARTUP = 3  # complete trials (any move's) before TPE models the space instead of sampling at random


@dataclass(frozen=True)
class _Move:
    settings: K.Settings
    kind: str  # seed | rule | experience | draft | neighbour | sampled | random
    why: str
    source: str | None = None  # the experience it applies


def _optuna() -> Any:
    import optuna  # loaded on the first search, not with the CLI

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


class Tuner:
    """Knob search for one agent on one task; ``observe`` replays a run to rebuild it."""

    name = "tuner"
    layered = False  # it orders knob moves by experiences and resident rules; the rest is prompt text

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
        for move in self._moves(turn, knobs, base):
            code = self._untried(turn, base, move.settings)
            if code is not None:
                return self._proposal(turn, base, move, code)
        return None

    def _untried(self, turn: Turn, base: K.Settings, settings: K.Settings) -> str | None:
        """The candidate for ``settings``, or None when this agent or the run has tried it."""
        # The working code's own settings are the working code itself, as written (the same hash).
        code = turn.code if K.key(settings) == K.key(base) else K.apply(turn.code, settings)
        if K.key(settings) in self.tried or code_hash(code) in turn.evaluated:
            return None
        return code

    # -- moves, best first -------------------------------------------------------------
    def _moves(self, turn: Turn, knobs: list[K.Knob], base: K.Settings) -> Iterator[_Move]:
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
        if self.search == "tpe":
            yield from self._sampled(turn, options, base)
        else:
            yield from self._neighbours(turn, knobs, base)
        yield from self._random(options)

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
                yield _Move(settings, "draft", "jump far from the plateau: " + K.describe(
                    {n: settings[n] for n in chosen}))

    def _neighbours(self, turn: Turn, knobs: list[K.Knob], base: K.Settings) -> Iterator[_Move]:
        ordered = sorted(knobs, key=lambda k: (not turn.lens.prefers(k.name), knobs.index(k)))
        for knob in ordered:
            for value in knob.options:
                if not K.same(value, base[knob.name]):
                    yield _Move({**base, knob.name: value}, "neighbour", f"{knob.name} → {K.show(value)}")

    def _random(self, options: dict) -> Iterator[_Move]:
        names = list(options)
        combos = list(itertools.islice(itertools.product(*(options[n] for n in names)), _MAX_ENUMERATED))
        self.rng.shuffle(combos)
        for combo in combos:
            yield _Move(dict(zip(names, combo, strict=True)), "random", "an untried setting")
        if math.prod(len(o) for o in options.values()) > _MAX_ENUMERATED:
            for _ in range(_MAX_ENUMERATED):  # beyond what is listed, random draws
                yield _Move({n: self.rng.choice(o) for n, o in options.items()}, "random", "an untried setting")

    # -- the sampler -------------------------------------------------------------------
    def _sampled(self, turn: Turn, options: dict, base: K.Settings) -> Iterator[_Move]:
        """TPE's suggestions given every observed attempt; a tried one is told its value and it asks again."""
        optuna = _optuna()
        study, distributions, values = self._study(optuna, options)
        neutral = statistics.median(values.values()) if values else 0.0
        for _ in range(_ASKS):
            trial = study.ask(distributions)
            settings = {**base, **{n: options[n][trial.params[n]] for n in options}}
            if self._untried(turn, base, settings) is not None:
                yield _Move(settings, "sampled", "TPE's suggestion given the attempts so far")
                return
            # Tried: tell the sampler what it measured (another agent's, unknown here, counts as neither).
            study.tell(trial, values.get(K.key(settings), neutral))

    def _study(self, optuna: Any, options: dict) -> tuple[optuna.Study, dict, dict[str, float]]:
        """A study of the observed attempts that fit the knobs, and each one's value by settings key."""
        distributions = {n: optuna.distributions.CategoricalDistribution(tuple(range(len(o))))
                         for n, o in options.items()}
        index = {n: {K.key({"v": v}): i for i, v in enumerate(o)} for n, o in options.items()}
        fitting = [(params, a) for a in self.tried.values() if (params := self._params(a.case.knobs, index))]
        measured = [math.log(a.speedup) for _, a in fitting if self._measured(a)]
        floor = min(measured, default=0.0) - 1.0  # a failed attempt ranks below every measured one
        values = {}
        trials = []
        for params, a in fitting:
            value = math.log(a.speedup) if self._measured(a) else floor
            values[K.key({n: options[n][i] for n, i in params.items()})] = value
            trials.append(optuna.trial.create_trial(params=params, distributions=distributions, value=value))
        with warnings.catch_warnings():  # multivariate TPE is experimental in some Optuna versions
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(multivariate=True, n_startup_trials=_STARTUP,
                                                 seed=self._sampler_seed + len(self.tried))
        study = optuna.create_study(direction="maximize", sampler=sampler)
        study.add_trials(trials)
        return study, distributions, values

    @staticmethod
    def _measured(attempt: Attempt) -> bool:
        return attempt.verdict != "REJECT" and attempt.speedup is not None and attempt.speedup > 0

    @staticmethod
    def _params(settings: K.Settings | None, index: dict[str, dict[str, int]]) -> dict[str, int] | None:
        """Each knob's option index for ``settings`` (``index``: option keys by knob); None when they do not fit."""
        if not settings or set(settings) != set(index):
            return None
        params = {n: index[n].get(K.key({"v": v})) for n, v in settings.items()}
        return None if None in params.values() else params

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
