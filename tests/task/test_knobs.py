"""Knobs: reading a candidate's KNOBS declaration and rewriting its assignments as source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kernelkiln
from kernelkiln.task import knobs as K

ROW_SOFTMAX = (Path(kernelkiln.__file__).parent / "examples" / "seeds" / "row_softmax.py").read_text()

SMALL = '''"""A candidate with knobs."""

FLAGS = ["-O2"]  # compiler flags
TILE = 32
MODE = "fast"
KEEP_ME = 7
KNOBS = {"FLAGS": [["-O2"], ["-O3", "-march=native"]], "TILE": [16, 32, 64], "MODE": ["fast", "exact"]}


def uses():
    TILE = 999  # a local, never rewritten
    return TILE
'''


def knob(knobs: list[K.Knob], name: str) -> K.Knob:
    return next(k for k in knobs if k.name == name)


# -- read_knobs ------------------------------------------------------------------------------
def test_read_knobs_of_row_softmax_seed_lists_every_knob_in_declaration_order():
    knobs = K.read_knobs(ROW_SOFTMAX)
    assert [k.name for k in knobs] == ["FLAGS", "ACCUMULATORS", "UNROLL", "VARIANT"]


def test_read_knobs_of_row_softmax_seed_gives_current_values_and_options():
    knobs = K.read_knobs(ROW_SOFTMAX)
    flags = knob(knobs, "FLAGS")
    assert flags.value == ["-O2"]
    assert flags.options == (["-O2"], ["-O3", "-march=native"], ["-O3", "-march=native", "-ffast-math"])
    assert knob(knobs, "ACCUMULATORS") == K.Knob("ACCUMULATORS", 1, (1, 4, 8, 16))
    assert knob(knobs, "UNROLL") == K.Knob("UNROLL", 1, (1, 2, 4))
    assert knob(knobs, "VARIANT") == K.Knob("VARIANT", "three_pass", ("three_pass", "online"))


def test_settings_of_maps_each_knob_to_its_current_value():
    assert K.settings_of(K.read_knobs(ROW_SOFTMAX)) == {
        "FLAGS": ["-O2"],
        "ACCUMULATORS": 1,
        "UNROLL": 1,
        "VARIANT": "three_pass",
    }


def test_a_candidate_without_knobs_declares_none():
    assert K.read_knobs("import torch\nX = 1\n") == []


# -- apply -----------------------------------------------------------------------------------
def test_apply_rewrites_the_named_assignments_and_rereads_with_new_values():
    new = K.apply(
        ROW_SOFTMAX, {"ACCUMULATORS": 8, "VARIANT": "online", "FLAGS": ["-O3", "-march=native", "-ffast-math"]}
    )
    ast.parse(new)
    assert K.settings_of(K.read_knobs(new)) == {
        "FLAGS": ["-O3", "-march=native", "-ffast-math"],
        "ACCUMULATORS": 8,
        "UNROLL": 1,
        "VARIANT": "online",
    }


def test_apply_leaves_every_other_line_untouched():
    new = K.apply(SMALL, {"TILE": 64})
    old_lines, new_lines = SMALL.splitlines(), new.splitlines()
    assert len(old_lines) == len(new_lines)
    changed = [(a, b) for a, b in zip(old_lines, new_lines, strict=True) if a != b]
    assert changed == [("TILE = 32", "TILE = 64")]


def test_apply_keeps_comments_after_a_rewritten_list_of_flags():
    new = K.apply(SMALL, {"FLAGS": ["-O3", "-march=native"]})
    assert "FLAGS = ['-O3', '-march=native']  # compiler flags\n" in new
    assert K.read_knobs(new)[0].value == ["-O3", "-march=native"]


def test_apply_does_not_touch_local_assignments_of_the_same_name():
    new = K.apply(SMALL, {"TILE": 16})
    assert "    TILE = 999  # a local, never rewritten" in new
    assert knob(K.read_knobs(new), "TILE").value == 16


def test_apply_writes_strings_as_python_literals():
    new = K.apply(SMALL, {"MODE": "exact"})
    ast.parse(new)
    assert knob(K.read_knobs(new), "MODE").value == "exact"


def test_apply_rewrites_a_multi_line_assignment_in_place():
    source = (
        'FLAGS = [\n    "-O2",\n    "-g",\n]  # end\nN = 1\n'
        'KNOBS = {"FLAGS": [["-O2"], ["-O3"]], "N": [1, 2]}\nAFTER = "kept"\n'
    )
    new = K.apply(source, {"FLAGS": ["-O3"], "N": 2})
    ast.parse(new)
    assert (
        new == 'FLAGS = [\'-O3\']  # end\nN = 2\nKNOBS = {"FLAGS": [["-O2"], ["-O3"]], "N": [1, 2]}\nAFTER = "kept"\n'
    )
    assert K.settings_of(K.read_knobs(new)) == {"FLAGS": ["-O3"], "N": 2}


def test_apply_handles_non_ascii_text_before_the_value_on_the_same_line():
    source = 'LABEL = "é→ü"; N = 1\nKNOBS = {"N": [1, 2]}\n'
    new = K.apply(source, {"N": 2})
    assert new == 'LABEL = "é→ü"; N = 2\nKNOBS = {"N": [1, 2]}\n'


def test_apply_with_no_settings_returns_the_source_unchanged():
    assert K.apply(SMALL, {}) == SMALL


def test_apply_of_a_name_without_assignment_is_a_knob_error():
    with pytest.raises(K.KnobError, match="'NOPE'"):
        K.apply(SMALL, {"NOPE": 1})


# -- errors ----------------------------------------------------------------------------------
def one_line_error(source: str) -> str:
    with pytest.raises(K.KnobError) as caught:
        K.read_knobs(source)
    message = str(caught.value)
    assert "\n" not in message and message
    return message


def test_a_knob_without_module_level_assignment_is_a_one_line_error():
    assert "'MISSING'" in one_line_error('KNOBS = {"MISSING": [1, 2]}\n')


def test_a_knob_assigned_only_inside_a_function_has_no_module_level_assignment():
    assert "no module-level assignment" in one_line_error('def f():\n    A = 1\nKNOBS = {"A": [1, 2]}\n')


def test_non_literal_knobs_is_a_one_line_error():
    assert "literal" in one_line_error("A = 1\nKNOBS = dict(A=[1, 2])\n")


def test_knobs_referring_to_a_variable_is_a_one_line_error():
    assert "literal" in one_line_error("A = 1\nOPTS = [1, 2]\nKNOBS = {'A': OPTS}\n")


def test_knobs_that_is_not_a_dict_is_a_one_line_error():
    assert "dict" in one_line_error("A = 1\nKNOBS = ['A']\n")


def test_an_empty_option_list_is_a_one_line_error():
    assert "non-empty" in one_line_error('A = 1\nKNOBS = {"A": []}\n')


def test_options_that_are_not_a_list_are_a_one_line_error():
    assert "'A'" in one_line_error('A = 1\nKNOBS = {"A": 3}\n')


def test_a_knob_assigned_a_non_literal_is_a_one_line_error():
    assert "'A'" in one_line_error('A = compute()\nKNOBS = {"A": [1, 2]}\n')


def test_a_candidate_that_does_not_parse_is_a_one_line_error():
    assert "does not parse" in one_line_error("A = (\n")


def test_knobs_with_an_unhashable_key_is_a_knob_error():
    with pytest.raises(K.KnobError):
        K.read_knobs('A = 1\nKNOBS = {["A"]: [1, 2]}\n')


# -- conditions and keys ---------------------------------------------------------------------
@pytest.mark.parametrize("value", [1, "online", ["-O3", "-march=native"], 0.5, True, None])
def test_condition_round_trips_through_parse_condition(value):
    text = K.condition("KNOB", value)
    assert text.startswith("set KNOB=")
    assert K.parse_condition(text) == ("KNOB", value)


def test_condition_of_flags_keeps_the_equals_sign_inside_a_flag():
    text = K.condition("FLAGS", ["-march=native"])
    assert text == 'set FLAGS=["-march=native"]'
    assert K.parse_condition(text) == ("FLAGS", ["-march=native"])


@pytest.mark.parametrize("text", ["vectorized the inner loop", "set TILE", "set TILE=not json", "TILE=4"])
def test_parse_condition_of_other_conditions_is_none(text):
    assert K.parse_condition(text) is None


def test_equal_settings_have_equal_keys_whatever_their_order():
    assert K.key({"A": 1, "FLAGS": ["-O2"]}) == K.key({"FLAGS": ["-O2"], "A": 1})


def test_different_settings_have_different_keys():
    assert K.key({"A": 1}) != K.key({"A": 2})
    assert K.key({"FLAGS": ["-O2"]}) != K.key({"FLAGS": ["-O2", "-g"]})


def test_describe_joins_flags_with_spaces():
    assert K.describe({"FLAGS": ["-O3", "-march=native"], "TILE": 32}) == "FLAGS=-O3 -march=native, TILE=32"
