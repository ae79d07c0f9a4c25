"""The graph's index arithmetic: reshapes joined again, read with no division left."""

from __future__ import annotations

import itertools

import pytest

from kernelkiln.lowering.graph import Input, linear, rejoin
from kernelkiln.lowering.views import reshape


def test_an_index_split_by_one_reshape_and_joined_by_the_next_reads_straight_through():
    x = Input((8, 32, 38, 38), "float")
    grouped = reshape(x, (8, 8, 4 * 38 * 38))
    assert reshape(grouped, (8, 32, 38, 38)) is x  # a reshape of a reshape is one reshape
    # the same split and join through an op between the reshapes: no division or modulo is left
    back = reshape(Input((8, 8, 4, 1444), "float"), (8, 32, 38, 38)).where(("n", "c", "h", "w"))
    split = reshape(Input((8, 32, 38, 38), "float"), (8, 8, 4, 1444)).where(back)
    assert "/" not in linear(split, (8, 32, 38, 38)) and "%" not in linear(split, (8, 32, 38, 38))


@pytest.mark.parametrize(
    "expr",
    ["y*((a)/4)*4 + (a)%4", "((a)/4)*4 + (a)%4*3", "q - ((a)/4)*4 + (a)%4", "((a)/3)*4 + (a)%3", "((a)/4)*4 + (b)%4"],
)
def test_rejoining_leaves_what_is_not_a_whole_term_of_the_same_split(expr):
    assert rejoin(expr) == expr


def test_rejoining_keeps_the_value_of_every_index():
    expr = "(i)*100 + (((j)*38 + k)/38)*38 + (((j)*38 + k)%38) - 1"
    assert rejoin(expr) == "(i)*100 + ((j)*38 + k) - 1"
    for i, j, k in [(0, 0, 0), (3, 5, 37), (7, 37, 12)]:  # noqa: B007 - eval reads them
        assert eval(rejoin(expr).replace("/", "//")) == eval(expr.replace("/", "//"))


def test_three_dims_merged_by_a_reshape_and_split_again_read_straight_through():
    # a group norm over a 3-d convolution's (C, D, H, W): (N, C, D, H, W) read as (N, G, C/G, D*H*W)
    split = reshape(Input((4, 16, 10, 14, 14), "float"), (4, 8, 2, 1960)).where(("n", "g", "c", "i"))
    offset = linear(split, (4, 16, 10, 14, 14))
    assert "/" not in offset and "%" not in offset


class CInt(int):
    """An int whose // and % are C's / and % (truncating toward zero)."""

    def __floordiv__(self, other: int) -> CInt:
        q = abs(int(self)) // abs(int(other))
        return CInt(q if (self >= 0) == (other > 0) else -q)

    def __mod__(self, other: int) -> CInt:
        return CInt(int(self) - int(self // other) * int(other))

    def __mul__(self, other: int) -> CInt:
        return CInt(int(self) * int(other))

    def __add__(self, other: int) -> CInt:
        return CInt(int(self) + int(other))


@pytest.mark.parametrize("a, b", [(14, 14), (3, 5), (7, 1)])
def test_rejoining_a_nested_split_keeps_c_s_value_for_negative_indices_too(a, b):
    expr = f"(((X)/{a})%{b})*{a} + ((X)%{a})"
    joined = rejoin(expr)
    assert joined == f"((X)%{a * b})"
    for x in itertools.chain(range(-3 * a * b, 3 * a * b), [10**6 + 7, -(10**6) - 7]):
        value = {"X": CInt(x)}
        assert eval(joined.replace("/", "//"), value) == eval(expr.replace("/", "//"), value)
