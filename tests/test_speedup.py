from kernelkiln.speedup import fmt_x


def test_a_speedup_reads_with_two_decimals_below_100_and_none_above():
    assert fmt_x(1.234) == "1.23x"
    assert fmt_x(123.4) == "123x"


def test_an_unknown_speedup_reads_as_the_missing_mark():
    assert fmt_x(None) == "—"
    assert fmt_x(None, missing="-") == "-"
