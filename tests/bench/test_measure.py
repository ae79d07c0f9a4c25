"""Planning a space's measurement: whole when small, the seed and a seeded sample when large."""

from __future__ import annotations

import pytest

from kernelkiln.bench.measure import plan_space
from kernelkiln.task import knobs as K
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.turns import tiny_task

SEED = (CANDIDATES / "softmax_knobs.py").read_text()


def test_a_small_space_is_planned_whole_with_the_seed_s_own_settings_first():
    plan = plan_space(tiny_task(), SEED)
    assert plan.whole and plan.size == 6 and len({K.key(s) for s in plan.configs}) == 6
    assert plan.configs[0] == K.settings_of(K.read_knobs(SEED))


def test_a_large_space_is_planned_as_the_seed_and_a_sample_the_same_each_time():
    plan = plan_space(tiny_task(), SEED, whole_up_to=4, sample=4)
    assert not plan.whole and plan.size == 6 and len({K.key(s) for s in plan.configs}) == 4
    assert plan.configs[0] == K.settings_of(K.read_knobs(SEED))
    assert plan.configs == plan_space(tiny_task(), SEED, whole_up_to=4, sample=4).configs


def test_code_without_knobs_is_a_space_of_one():
    plan = plan_space(tiny_task(), "x = 1\n")
    assert plan.whole and plan.configs == [{}]


def test_a_space_s_value_is_its_optimum_over_its_seed_and_median_and_random_search_s_exact_cost(tmp_path):
    from kernelkiln.bench.space_values import space_values
    from kernelkiln.testing.spaces import MACHINE, made_up

    keys = [K.key(s) for s in plan_space(tiny_task(), SEED).configs]  # the seed's first
    figures = dict(zip(keys, [1.0, 1.2, 1.9, 2.0, 0.5, 0.8], strict=True))
    (value,) = space_values(made_up(tmp_path / "d.jsonl", tiny_task(), SEED, figures), MACHINE.key)
    assert value.start == pytest.approx(1.0, rel=1e-3) and value.optimum == pytest.approx(2.0, rel=1e-3)
    assert value.over_start == pytest.approx(2.0, rel=1e-3) and value.over_median == pytest.approx(2.0 / 1.1, rel=1e-3)
    assert value.random_evals_to_95 == pytest.approx(7 / 3) and not value.flat  # 1.9 and 2.0 are within 5%
    flat = dict(zip(keys, [1.0, 1.01, 0.9, 0.7, 0.5, 0.8], strict=True))
    (value,) = space_values(made_up(tmp_path / "f.jsonl", tiny_task(), SEED, flat), MACHINE.key)
    assert value.flat


def test_random_search_s_exact_curve_rises_from_the_mean_to_the_optimum():
    from kernelkiln.bench.space_values import random_curve

    curve = random_curve([1.0, 2.0, 3.0, 4.0], 5)
    assert curve[0] == pytest.approx(2.5)  # one draw: the mean
    assert curve[1] == pytest.approx((2 * 1 + 3 * 2 + 4 * 3) / 6)  # the best of two: pairs with their maxima
    assert curve[3:] == [4.0, 4.0]


def test_willemsen_s_score_is_one_at_the_optimum_zero_at_random_search_and_none_with_no_room():
    from kernelkiln.bench.figures import willemsen

    random = [0.5, 0.75, 1.0]
    assert willemsen([1.0, 1.0, 1.0], random) == pytest.approx(1.0)
    assert willemsen(random, random) == pytest.approx(0.0)
    assert willemsen([0.5, 0.5, 0.5], random) < 0
    assert willemsen([1.0], [1.0]) is None


def test_a_replayed_study_values_candidates_by_the_table_and_tasks_by_their_measured_optimum(tmp_path):
    from kernelkiln.bench.space_values import TableConsensus
    from kernelkiln.policy.turn import code_hash
    from kernelkiln.testing.spaces import MACHINE, made_up

    plan = plan_space(tiny_task(), SEED)
    figures = dict(zip([K.key(s) for s in plan.configs], [1.0, 1.2, 1.9, 2.0, 0.5, 0.8], strict=True))
    table = TableConsensus(made_up(tmp_path / "d.jsonl", tiny_task(), SEED, figures), MACHINE.key)
    assert table.best("tiny_softmax") == pytest.approx(2.0, rel=1e-3)
    assert table.value("tiny_softmax", code_hash(SEED)) == pytest.approx(1.0, rel=1e-3)
    assert table.value("tiny_softmax", code_hash(K.apply(SEED, plan.configs[3]))) == pytest.approx(2.0, rel=1e-3)
    assert table.random("tiny_softmax", 6)[-1] == pytest.approx(1.0)


def test_a_larger_sample_extends_a_smaller_one_so_a_dataset_grows_without_measuring_again():
    small = plan_space(tiny_task(), SEED, whole_up_to=4, sample=3).configs
    assert plan_space(tiny_task(), SEED, whole_up_to=4, sample=5).configs[:3] == small


def test_measuring_into_a_dataset_that_holds_another_task_of_the_same_name_is_refused(tmp_path):
    import dataclasses

    from kernelkiln.bench.measure import Measurer
    from kernelkiln.errors import UserError
    from kernelkiln.evaluation.spaces import Dataset
    from kernelkiln.guard.config import GuardConfig
    from kernelkiln.testing.spaces import made_up

    task = tiny_task()
    made_up(tmp_path / "d.jsonl", task, SEED, {K.key(K.settings_of(K.read_knobs(SEED))): 1.0})
    other = dataclasses.replace(task, source=task.source + "\n# another file of the same name\n")
    with pytest.raises(UserError, match="holds another task named"):
        Measurer(Dataset(tmp_path / "d.jsonl"), GuardConfig()).run([plan_space(other, SEED)])
