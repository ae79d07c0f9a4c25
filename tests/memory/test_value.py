import pytest

from kernelkiln.memory.config import ValueConfig
from kernelkiln.memory.value import (
    correctness_score,
    learning_rate,
    optimization_score,
    stage_feedback,
    updated_value,
)


def test_design_worked_example():
    # 1.0 ms → 0.6 ms: s = 0.4; two adopted get +0.2 each; the unadopted one gets −0.2.
    s = optimization_score(1.0, 0.6, eta=0.2)
    assert s == pytest.approx(0.4)
    feedback = stage_feedback(s, retrieved={"a", "b", "c"}, adopted={"a", "b"}, eta=0.2)
    assert feedback == pytest.approx({"a": 0.2, "b": 0.2, "c": -0.2})


def test_stage_scores():
    assert correctness_score(True, 0.2) == 1.0
    assert correctness_score(False, 0.2) == -0.2
    assert optimization_score(1.0, 1.0, 0.2) == -0.2  # no improvement
    assert optimization_score(1.0, 1.3, 0.2) == -0.2
    assert optimization_score(None, 0.5, 0.2) == -0.2
    assert optimization_score(2.0, 0.5, 0.3) == pytest.approx(0.75)


def test_adopted_share_is_deduplicated():
    assert stage_feedback(0.9, ["a", "a", "b"], ["a", "a", "b", "c"], 0.2) == pytest.approx(
        {"a": 0.3, "b": 0.3, "c": 0.3}
    )
    assert stage_feedback(1.0, ["a"], [], 0.1) == {"a": -0.1}


def test_uniform_credit_rewards_every_retrieved_experience_alike():
    feedback = stage_feedback(0.4, retrieved={"a", "b", "c"}, adopted={"a"}, eta=0.2, credit="uniform")
    assert feedback == pytest.approx({"a": 0.4, "b": 0.4, "c": 0.4})
    assert stage_feedback(-0.2, ["a", "b"], [], 0.2, credit="uniform") == pytest.approx({"a": -0.2, "b": -0.2})


def test_learning_rate_has_a_floor():
    assert learning_rate(1, 0.05) == 1.0
    assert learning_rate(4, 0.05) == 0.25
    assert learning_rate(20, 0.05) == 0.05
    assert learning_rate(100, 0.05) == 0.05


def test_value_update():
    config = ValueConfig()
    assert updated_value(0.0, 0.2, 1, config) == pytest.approx(0.2)  # α = 1
    assert updated_value(0.2, 1.0, 2, config) == pytest.approx(0.6)  # α = 1/2
    assert updated_value(0.5, 1.0, 100, config) == pytest.approx(0.525)  # α = 0.05
    assert updated_value(0.0, -0.5, 1, config) == -0.2  # clamped to −η
    assert updated_value(0.0, 3.0, 1, config) == 1.0  # clamped to 1
