"""Planning a space's measurement: whole when small, the seed and a seeded sample when large."""

from __future__ import annotations

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
