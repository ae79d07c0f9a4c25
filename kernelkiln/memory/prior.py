"""What stored tasks lend a new task's knob search: exact reuse, and transfer from its nearest neighbours.

Built once when a task starts, from the attempts memory holds under each task's signature
(``memory/signature.py``), never from the running task's own run:

- *exact reuse*: tasks whose signature's exact key equals the new one's have the same knob
  space with the same figures. Their best KEEP's settings are the first candidate (one
  evaluation confirms it), and every setting they evaluated is known: told to the sampler,
  never evaluated again (MetaSchedule's database);
- *transfer*: the ``neighbours`` nearest other tasks within ``max_distance``. Their best
  settings are tried first, nearest first; their trials warm-start the sampler, each valued by
  its rank within its own task (tasks differ in scale, not in what is fast); and a knob value
  that lost in every evaluation that held it on every neighbour that tried it, ``loss_evidence``
  evaluations in all over ``trap_tasks`` neighbours or more (a short search tries each value of a
  knob only once or twice per task, so the evidence is pooled), is a trap, set aside from the
  first evaluation.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import cast

from kernelkiln.memory.config import TransferConfig
from kernelkiln.memory.signature import distance
from kernelkiln.store.attempts import Outcome
from kernelkiln.store.records import Case, Signature
from kernelkiln.store.store import Store
from kernelkiln.task import knobs as K

FAILED = -1.0  # a failed trial's value: below every measured one (measured ones rank in [0, 1])


@dataclass(frozen=True)
class Trial:
    """A setting evaluated on some task, valued by its rank there (0 its slowest, 1 its fastest; FAILED)."""

    settings: K.Settings
    value: float
    speedup: float | None = None  # its median figure there (None: it failed)


@dataclass(frozen=True)
class Neighbour:
    """A stored task near the new one, and what its attempts say."""

    task_id: str
    distance: float
    best: K.Settings | None  # the settings of its fastest KEEP
    best_speedup: float | None
    trials: tuple[Trial, ...]


@dataclass(frozen=True)
class Prior:
    """What memory lends a task's search; empty when it knows nothing comparable."""

    reuse: K.Settings | None = None  # the exact match's best settings: the first candidate
    reused_from: str | None = None  # that task's id
    known: tuple[Trial, ...] = ()  # every setting the exact match evaluated (the same figures here)
    neighbours: tuple[Neighbour, ...] = ()
    traps: frozenset[K.Value] = frozenset()
    loss_evidence: int = 3  # the tuner sets a knob value aside after this many evaluations, all lost
    start_first: bool = False  # the seed before the neighbours' bests (TransferConfig.seed_first)
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def empty(self) -> bool:
        return self.reuse is None and not self.known and not self.neighbours


def contest(verdict: str, case: Case) -> bool | None:
    """Whether an evaluation lost: slower than the incumbent it was judged against, or failed (REVERT, REJECT).

    None for the first correct candidate of a run (KEEP with no incumbent to beat): it won nothing.
    """
    if verdict == "KEEP" and case.speedup_vs_incumbent is None:
        return None
    return verdict in ("REVERT", "REJECT")


def ranked(outcomes: list[Outcome]) -> list[Trial]:
    """Each knob setting's trial, valued by its median rank among the task's measured attempts."""
    return rank_trials(
        [(o.case.knobs, o.speedup if _measured(o) else None) for o in outcomes if o.case.knobs and not _unknown(o)]
    )


def rank_trials(figures: list[tuple[K.Settings, float | None]]) -> list[Trial]:
    """(settings, speedup or None when it failed) as one trial per setting, valued by its median rank."""
    measured = sorted(s for _, s in figures if s is not None)
    ranks: dict[str, list[float]] = {}
    speedups: dict[str, list[float]] = {}
    settings: dict[str, K.Settings] = {}
    for knobs, speedup in figures:
        key = K.key(knobs)
        settings[key] = knobs
        if speedup is None:
            ranks.setdefault(key, []).append(FAILED)
            continue
        below = sum(1 for s in measured if s < speedup) + 0.5 * (sum(1 for s in measured if s == speedup) - 1)
        ranks.setdefault(key, []).append(below / (len(measured) - 1) if len(measured) > 1 else 0.5)
        speedups.setdefault(key, []).append(speedup)
    return [
        Trial(settings[k], statistics.median(v), statistics.median(speedups[k]) if k in speedups else None)
        for k, v in ranks.items()
    ]


def _measured(outcome: Outcome) -> bool:
    return outcome.verdict != "REJECT" and outcome.speedup is not None and outcome.speedup > 0


def _unknown(outcome: Outcome) -> bool:
    """Correct but untimed (the guard could not measure it, or Triton ran interpreted): neither won nor lost."""
    return outcome.verdict != "REJECT" and outcome.speedup is None


def _outcomes(outcomes: list[Outcome]) -> list[tuple[K.Settings, bool | None, float | None]]:
    return [
        (o.case.knobs, contest(o.verdict, o.case), o.speedup if _measured(o) else None)
        for o in outcomes
        if o.case.knobs and not _unknown(o)
    ]


def _best(outcomes: list[Outcome]) -> Outcome | None:
    """The fastest of the runs' results. A run's result is its latest KEEP (each KEEP beat the one before, side by
    side), not its KEEP with the highest figure: figures of separate evaluations are noisier than the guard's
    comparison, and reuse must hand back the kernel the run returned. ``outcomes``: oldest first."""
    results: dict[str | None, Outcome] = {}
    for o in outcomes:
        if o.verdict == "KEEP" and o.speedup and o.case.knobs:
            results[o.run_id] = o
    return max(results.values(), key=lambda o: cast(float, o.speedup), default=None)


def build(store: Store, mine: Signature, run_id: str | None, config: TransferConfig) -> Prior:
    """The prior for a task with signature ``mine``, from what ``store`` holds outside run ``run_id``."""
    with store.read() as conn:
        stored = store.signatures.on_machine(conn, mine.platform, mine.machine)
        exact = [s for s in stored if s.exact == mine.exact] if config.exact else []
        near: dict[str, tuple[float, Signature]] = {}
        portfolio = config.similarity == "none"  # every stored task, ranked below by its best's figure
        for s in stored:
            d = distance(mine, s) if s.exact != mine.exact else None
            if d is None and portfolio and s.exact != mine.exact:
                d = math.inf
            fits = d is not None and (portfolio or d <= config.max_distance)
            if fits and d is not None and (s.task_id not in near or d < near[s.task_id][0]):
                near[s.task_id] = (d, s)
        chosen = sorted(near.values(), key=lambda p: (p[0], p[1].task_id))
        chosen = chosen if portfolio else chosen[: config.neighbours]
        wanted = [s.task_id for s in exact] + [s.task_id for _, s in chosen]
        outcomes = store.attempts.outcomes(conn, list(dict.fromkeys(wanted)))

    def under(sig: Signature) -> list[Outcome]:
        return [
            o for o in outcomes if o.task_id == sig.task_id and o.case.signature == sig.exact and o.run_id != run_id
        ]

    known = [o for s in exact for o in under(s)]
    reuse = _best(known)
    neighbours = []
    for d, s in chosen:
        theirs = under(s)
        if not theirs:
            continue
        best = _best(theirs)
        neighbours.append(
            Neighbour(
                s.task_id, d, best.case.knobs if best else None, best.speedup if best else None, tuple(ranked(theirs))
            )
        )
    if portfolio:  # the fastest bests anywhere, fastest first
        neighbours = sorted(neighbours, key=lambda n: (-(n.best_speedup or 0.0), n.task_id))[: config.neighbours]
        kept = {n.task_id for n in neighbours}
        chosen = [(d, s) for d, s in chosen if s.task_id in kept]
    # Evidence pooled over the neighbours: a trap lost in every evaluation that held it on each neighbour that
    # tried it (loss_evidence evaluations or more in all), on trap_tasks of them at least.
    pooled: dict[K.Value, tuple[int, int, bool]] = {}
    for _, s in chosen:
        for value, (held, won) in K.value_record(_outcomes(under(s))).items():
            total, tasks, any_won = pooled.get(value, (0, 0, False))
            pooled[value] = (total + held, tasks + 1, any_won or won)
    traps = frozenset(
        v
        for v, (total, tasks, won) in pooled.items()
        if not won and total >= config.loss_evidence and tasks >= config.trap_tasks
    )
    # A value that lost everywhere on an exact match lost on this very task.
    traps |= K.losing_values(_outcomes(known), config.loss_evidence)
    notes = []
    if reuse is not None:
        notes.append(
            f"exact match {reuse.task_id}: its best ({reuse.speedup:.2f}x) first, "
            f"{len(ranked(known))} known settings not tried again"
        )
    if neighbours:
        notes.append(
            "nearest stored tasks: "
            + ", ".join(f"{n.task_id} ({n.distance:.2f})" for n in neighbours)
            + (f"; {len(traps)} trap value(s)" if traps else "")
        )
    return Prior(
        reuse=reuse.case.knobs if reuse else None,
        reused_from=reuse.task_id if reuse else None,
        known=tuple(ranked(known)),
        neighbours=tuple(neighbours),
        traps=traps,
        loss_evidence=config.loss_evidence,
        start_first=config.start_first == "always",
        notes=tuple(notes),
    )
