"""The cost model across stored tasks: knob values' effects on rank, and its best configurations."""

from __future__ import annotations

from kernelkiln.memory.config import TransferConfig
from kernelkiln.memory.cost_model import SHRINK, TaskTrials, fit
from kernelkiln.memory.prior import build
from kernelkiln.task import knobs as K

from .test_prior import s, sig, stored

OPTIONS = {"ACC": (1, 2, 4, 8), "UNROLL": (1, 2), "FLAGS": ("-O2", "-O3")}


def test_a_value_above_its_tasks_mean_rank_everywhere_has_a_positive_effect_shrunk_by_its_evidence():
    a = TaskTrials(1.0, ((s(8), 1.0), (s(1), 0.0)))
    b = TaskTrials(1.0, ((s(8, 2), 1.0), (s(2, 2), 0.5), (s(1, 2), 0.0)))
    model = fit([a, b])
    assert model is not None and model.tasks == 2
    acc8 = ("ACC", K.key({"v": 8}))
    assert model.effects[acc8] == (0.5 + 0.5) / (2 + SHRINK)
    assert model.effects[("ACC", K.key({"v": 1}))] < 0 < model.effects[acc8]
    assert model.score(s(8)) > model.score(s(1))


def test_the_model_s_best_configurations_come_in_order_of_score_keeping_the_base_where_it_knows_nothing():
    model = fit([TaskTrials(1.0, ((s(8, 1, "-O3"), 1.0), (s(2, 1, "-O3"), 0.6), (s(1, 1, "-O2"), 0.0)))])
    assert model is not None
    base = {"ACC": 1, "UNROLL": 2, "FLAGS": "-O2", "VEC": 4}
    best = model.best({**OPTIONS, "VEC": (4, 8)}, base, 3)
    # VEC: no evidence; UNROLL: every trial held 1, so nothing tells 1 from 2: both keep the base's value
    assert best[0] == {"ACC": 8, "UNROLL": 2, "FLAGS": "-O3", "VEC": 4}
    assert [model.score(b) for b in best] == sorted((model.score(b) for b in best), reverse=True)
    assert len({K.key(b) for b in best}) == 3


def test_no_model_from_tasks_without_two_trials_to_compare():
    assert fit([TaskTrials(1.0, ((s(8), 1.0),))]) is None
    assert fit([]) is None


def test_the_prior_carries_a_model_over_every_stored_task_only_when_asked(store):
    stored(store, sig("near"), [[(s(1), "KEEP", 1.0), (s(8), "KEEP", 3.0)]])
    stored(store, sig("far", family="norm", elements=40.0), [[(s(1), "KEEP", 1.0), (s(8), "KEEP", 2.0)]])
    assert build(store, sig("new"), None, TransferConfig()).model is None
    prior = build(store, sig("new"), None, TransferConfig(cost_model=2, max_distance=0.5))
    assert prior.model is not None and prior.model.tasks == 2  # beyond the neighbours' distance too
    assert prior.model_moves == 2 and any("cost model over 2" in n for n in prior.notes)
