import pytest

from kernelkiln.stats import geomean


def test_geomean_of_positive_values():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean(x for x in (3.0,)) == pytest.approx(3.0)


def test_geomean_of_nothing_is_none():
    assert geomean([]) is None
