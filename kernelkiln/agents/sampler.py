"""The tuner's TPE study: its own trials and what memory lends, each valued by rank.

Every trial is a setting of the knobs (each a categorical of its options' indices) valued by
its rank among the evaluations of its own task: 0 the slowest, 1 the fastest, FAILED below
all. TPE splits trials into good and bad by their order alone, so ranks lose nothing on a
task's own trials, and they let trials of other tasks (whose speedups differ in scale, not
in what is fast) join the study: the task's own attempts, with those of an exact match
(the same figures), are ranked together; neighbours' trials come ranked within their task
and enter first, so once trials pass TPE's window they weigh less than the task's own.
"""

from __future__ import annotations

import warnings
from typing import Any

from kernelkiln.memory.prior import Trial, rank_trials
from kernelkiln.task import knobs as K

STARTUP = 3  # complete trials (any move's, lent ones included) before TPE models the space instead of sampling


def optuna_module() -> Any:
    import optuna  # loaded on the first search, not with the CLI

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


class Study:
    """An Optuna study over ``options`` with the trials given; ``values`` holds the own trials' values by key."""

    def __init__(
        self,
        options: dict[str, tuple],
        base: K.Settings,
        own: list[tuple[K.Settings, float | None]],
        lent: list[Trial],
        seed: int,
    ):
        optuna = optuna_module()
        self.options = options
        self.distributions = {
            n: optuna.distributions.CategoricalDistribution(tuple(range(len(o)))) for n, o in options.items()
        }
        self._index = {n: {K.key({"v": v}): i for i, v in enumerate(o)} for n, o in options.items()}
        mine = rank_trials([(s, v) for s, v in own if self.params(s, base) is not None])
        self.values = {K.key(t.settings): t.value for t in mine}
        trials = []
        for trial in [*lent, *mine]:  # lent first: the older trials of TPE's window
            params = self.params(trial.settings, base)
            if params is not None:
                trials.append(
                    optuna.trial.create_trial(params=params, distributions=self.distributions, value=trial.value)
                )
        with warnings.catch_warnings():  # multivariate TPE is experimental in some Optuna versions
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(multivariate=True, n_startup_trials=STARTUP, seed=seed)
        self.study = optuna.create_study(direction="maximize", sampler=sampler)
        self.study.add_trials(trials)

    def params(self, settings: K.Settings | None, base: K.Settings) -> dict[str, int] | None:
        """Each knob's option index for ``settings`` (a knob it lacks: the base's value); None when one does not fit."""
        if not settings:
            return None
        params: dict[str, int] = {}
        for n in self.options:
            index = self._index[n].get(K.key({"v": settings.get(n, base.get(n))}))
            if index is None:
                return None
            params[n] = index
        return params

    def ask(self) -> tuple[Any, K.Settings]:
        """A suggestion: the trial to tell, and its settings."""
        trial = self.study.ask(self.distributions)
        return trial, {n: self.options[n][trial.params[n]] for n in self.options}

    def tell(self, trial: Any, value: float) -> None:
        self.study.tell(trial, value)
