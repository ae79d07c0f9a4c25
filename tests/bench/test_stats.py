"""Geometric means with t intervals over repeats."""

from __future__ import annotations

import math

import pytest

from kernelkiln.bench.stats import geometric_interval, paired_ratio, t975


def test_the_interval_is_a_t_interval_on_the_logarithms():
    interval = geometric_interval([1.0, math.e, math.e**2])  # logs 0, 1, 2: mean 1, sd 1
    half = 4.303 / math.sqrt(3)
    assert interval.mean == pytest.approx(math.e)
    assert (interval.low, interval.high) == pytest.approx((math.exp(1 - half), math.exp(1 + half)))
    assert interval.as_dict() == {"mean": interval.mean, "ci95": [interval.low, interval.high], "k": 3}


def test_equal_values_have_a_zero_width_interval_and_one_value_has_none():
    same = geometric_interval([2.0, 2.0, 2.0])
    assert (same.low, same.mean, same.high) == pytest.approx((2.0, 2.0, 2.0))
    one = geometric_interval([3.0])
    assert one.mean == pytest.approx(3.0) and one.low is None and one.as_dict()["ci95"] is None
    assert geometric_interval([]) is None and geometric_interval([None]) is None


def test_t_quantiles_fall_to_the_normal_beyond_thirty_degrees_of_freedom():
    assert t975(1) == 12.706 and t975(30) == 2.042 and t975(200) == 1.96
    with pytest.raises(ValueError):
        t975(0)


def test_a_paired_ratio_uses_only_the_repeats_both_arms_have():
    ratio = paired_ratio({0: 2.0, 1: 4.0, 2: 8.0}, {0: 1.0, 1: 2.0})
    assert ratio.k == 2 and ratio.mean == pytest.approx(2.0) and ratio.low == pytest.approx(2.0)


def test_spearman_is_one_for_the_same_order_minus_one_reversed_and_takes_ties_at_their_mean_rank():
    from kernelkiln.bench.stats import spearman

    assert spearman([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 45.0]) == pytest.approx(1.0)
    assert spearman([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    assert spearman([1.0, 1.0, 2.0, 3.0], [1.0, 1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert spearman([1.0, 2.0], [1.0, 2.0]) is None and spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None


def test_wilcoxon_gives_scipys_p_values_exact_without_ties_and_normal_with_them():
    from kernelkiln.bench.stats import wilcoxon

    # scipy.stats.wilcoxon's documented example (exact: 0.041259765625), and two checked against scipy 1.17.1
    assert wilcoxon([6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75]) == pytest.approx(0.041259765625)
    untied = [3, -1, 2, 4, -5, *range(6, 27), -27, 28, 29, 30]
    assert wilcoxon(untied) == pytest.approx(5.973502993583679e-06)
    tied = [1.5, 2, 2, -1, 3, 3, 4, -0.5, 5, 5, *range(6, 23), -23, 24, 25]
    assert wilcoxon(tied) == pytest.approx(3.400374461841663e-05)


def test_wilcoxon_drops_zeros_and_needs_two_differences():
    from kernelkiln.bench.stats import wilcoxon

    assert wilcoxon([0.0, 0.0, 1.0]) is None
    assert wilcoxon([0.0, 1.0, -1.0]) == pytest.approx(1.0)
    assert wilcoxon([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == pytest.approx(2 / 64)
