import pytest

from kernelkiln.context import TokenEstimator


def test_starts_at_four_characters_per_token():
    estimator = TokenEstimator()
    assert estimator.chars_per_token == 4.0
    assert estimator.estimate("x" * 400) == 100
    assert estimator.estimate("x" * 401) == 101  # rounded up
    assert estimator.estimate("") == 0


def test_calibrates_to_reported_usage():
    estimator = TokenEstimator()
    estimator.observe(prompt_chars=6_000, prompt_tokens=2_000)
    assert estimator.chars_per_token == pytest.approx(3.0)
    assert estimator.estimate("x" * 300) == 100


def test_calibration_is_a_running_total_not_the_last_sample():
    estimator = TokenEstimator()
    estimator.observe(prompt_chars=6_000, prompt_tokens=2_000)
    estimator.observe(prompt_chars=1_000, prompt_tokens=1_000)
    assert estimator.chars_per_token == pytest.approx(7_000 / 3_000)
    assert estimator.observations == (7_000, 3_000)


def test_ignores_empty_reports():
    estimator = TokenEstimator(chars_per_token=3.5)
    estimator.observe(prompt_chars=0, prompt_tokens=100)
    estimator.observe(prompt_chars=100, prompt_tokens=0)
    assert estimator.chars_per_token == 3.5


def test_absurd_reports_are_clamped():
    estimator = TokenEstimator()
    estimator.observe(prompt_chars=1_000_000, prompt_tokens=1)
    assert estimator.chars_per_token == 10.0


def test_estimates_of_parts_never_sum_below_the_whole():
    estimator = TokenEstimator()
    estimator.observe(prompt_chars=7_000, prompt_tokens=2_000)
    parts = ["abc", "de", "fghij" * 7, "k"]
    assert sum(estimator.estimate(p) for p in parts) >= estimator.estimate("".join(parts))


def test_initial_ratio_must_be_positive():
    with pytest.raises(ValueError):
        TokenEstimator(chars_per_token=0)
