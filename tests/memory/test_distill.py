"""Distillation: wins and best configurations become experiences with stable, content-derived ids."""

from __future__ import annotations

import pytest

from kernelkiln.memory import distill
from kernelkiln.store.records import Attempt
from kernelkiln.task import knobs as K

START_KNOBS = {"REPEAT": 4, "FLAGS": ["-O2"]}


def attempt(verdict: str = "KEEP", speedup: float | None = 2.0, task_id: str = "tiny_softmax", **fields) -> Attempt:
    """An attempt derived from a parent (a root, parent_id None, is asked for explicitly)."""
    fields.setdefault("parent_id", "a-parent")
    return Attempt(task_id=task_id, verdict=verdict, speedup=speedup, **fields)


def seed(task_id: str = "tiny_softmax", speedup: float = 1.0) -> Attempt:
    return attempt("ACCEPT", speedup, task_id, parent_id=None, case={"knobs": dict(START_KNOBS), "move": "seed"})


def knob_win(task_id: str = "tiny_softmax", speedup: float = 2.0, **changed) -> Attempt:
    changed = changed or {"REPEAT": 1}
    return attempt(
        "KEEP",
        speedup,
        task_id,
        summary="neighbour: " + K.describe(changed),
        case={"knobs": {**START_KNOBS, **changed}, "changed": changed, "move": "neighbour"},
    )


# -- win ---------------------------------------------------------------------------------------
def test_a_kept_knob_move_becomes_an_experience_with_set_conditions():
    won = knob_win(REPEAT=1)
    lesson = distill.win(won, seed(), "softmax", "cpu")
    assert lesson is not None
    assert lesson.conditions == ["set REPEAT=1"]
    assert [K.parse_condition(c) for c in lesson.conditions] == [("REPEAT", 1)]
    assert lesson.stage == "optimization"
    assert (lesson.op_family, lesson.platform) == ("softmax", "cpu")
    assert lesson.source_attempt_id == won.id
    assert lesson.kind == "experience"
    assert lesson.summary == "REPEAT=1"


def test_the_win_text_says_what_changed_from_what_and_by_how_much():
    lesson = distill.win(knob_win(speedup=3.0, REPEAT=1), seed(speedup=1.5), "softmax", "cpu")
    assert "REPEAT=1" in lesson.text and "(was REPEAT=4)" in lesson.text
    assert "2.00x faster than its parent" in lesson.text
    assert "3.00x the reference" in lesson.text
    assert "tiny_softmax" in lesson.text


def test_conditions_of_several_changed_knobs_are_sorted_by_name_and_round_trip():
    lesson = distill.win(knob_win(REPEAT=1, FLAGS=["-O1"]), seed(), "softmax", "cpu")
    assert lesson.conditions == [K.condition("FLAGS", ["-O1"]), K.condition("REPEAT", 1)]
    assert dict(K.parse_condition(c) for c in lesson.conditions) == {"FLAGS": ["-O1"], "REPEAT": 1}


def test_a_win_without_op_family_is_tagged_unknown():
    assert distill.win(knob_win(), None, None, "cpu").op_family == "unknown"


def test_a_win_without_parent_has_no_parent_comparison():
    lesson = distill.win(knob_win(), None, "softmax", "cpu")
    assert "parent" not in lesson.text and "was" not in lesson.text


def test_the_same_knob_change_on_another_task_is_the_same_experience():
    here = distill.win(knob_win("tiny_softmax", 2.0, REPEAT=1), seed("tiny_softmax"), "softmax", "cpu")
    there = distill.win(knob_win("other_softmax", 5.0, REPEAT=1), seed("other_softmax", 2.0), "softmax", "cpu")
    assert here.id == there.id
    assert here.id.startswith("e-")


def test_a_different_change_family_or_platform_is_a_different_experience():
    base = distill.win(knob_win(REPEAT=1), seed(), "softmax", "cpu").id
    assert distill.win(knob_win(REPEAT=2), seed(), "softmax", "cpu").id != base
    assert distill.win(knob_win(REPEAT=1), seed(), "layernorm", "cpu").id != base
    assert distill.win(knob_win(REPEAT=1), seed(), "softmax", "cuda").id != base


@pytest.mark.parametrize("verdict", ["ACCEPT", "REVERT", "REJECT"])
def test_a_verdict_other_than_keep_teaches_nothing(verdict):
    won = knob_win()
    not_kept = won.model_copy(update={"verdict": verdict})
    assert distill.win(not_kept, seed(), "softmax", "cpu") is None


def test_a_kept_root_teaches_nothing():
    root = attempt("KEEP", 3.0, parent_id=None, case={"knobs": dict(START_KNOBS), "changed": {}, "move": "seed"})
    assert distill.win(root, None, "softmax", "cpu") is None


def test_a_keep_without_a_speedup_teaches_nothing():
    assert distill.win(attempt("KEEP", None, case={"changed": {"REPEAT": 1}}), None, "softmax", "cpu") is None


def test_an_llm_keep_without_changed_knobs_uses_its_summary_and_journal():
    won = attempt(
        "KEEP",
        2.5,
        summary="online softmax in one pass",
        journal="## Strategy\nfuse the max and the sum\n",
        case={"move": "llm", "calls": [[10, 5]]},
    )
    lesson = distill.win(won, None, "softmax", "cpu")
    assert lesson.summary == "online softmax in one pass"
    assert "online softmax in one pass" in lesson.text and "fuse the max and the sum" in lesson.text
    assert lesson.conditions == []
    assert lesson.stage == "optimization" and lesson.source_attempt_id == won.id


def test_a_long_journal_is_cut_in_the_lesson():
    won = attempt("KEEP", 2.0, summary="tiled", journal="x" * 5000)
    assert len(distill.win(won, None, "softmax", "cpu").text) < 1000


def test_the_same_llm_summary_on_the_same_task_is_the_same_experience():
    first = attempt("KEEP", 2.0, summary="online softmax", journal="one")
    again = attempt("KEEP", 3.0, summary="online softmax", journal="two")
    assert distill.win(first, None, "softmax", "cpu").id == distill.win(again, None, "softmax", "cpu").id


# -- best configuration ------------------------------------------------------------------------
def test_best_configuration_records_every_knob():
    best = knob_win(speedup=3.0, REPEAT=1, FLAGS=["-O1"])
    lesson = distill.best_configuration(best, seed(speedup=1.0), "softmax", "cpu")
    assert dict(K.parse_condition(c) for c in lesson.conditions) == {"REPEAT": 1, "FLAGS": ["-O1"]}
    assert lesson.conditions == sorted(lesson.conditions)
    assert lesson.summary.startswith("best configuration:")
    assert "3.00x its seed" in lesson.text and "3.00x the reference" in lesson.text
    assert (lesson.stage, lesson.op_family, lesson.platform) == ("optimization", "softmax", "cpu")
    assert lesson.source_attempt_id == best.id


def test_best_configuration_id_is_stable_across_tasks_and_distinct_from_a_win():
    here = distill.best_configuration(knob_win("t1", 3.0, REPEAT=1), seed("t1"), "softmax", "cpu")
    there = distill.best_configuration(knob_win("t2", 4.0, REPEAT=1), seed("t2"), "softmax", "cpu")
    assert here.id == there.id
    assert here.id != distill.win(knob_win("t1", 3.0, REPEAT=1), seed("t1"), "softmax", "cpu").id


def test_best_configuration_is_none_when_the_best_is_not_faster_than_the_seed():
    assert distill.best_configuration(knob_win(speedup=1.0), seed(speedup=1.0), "softmax", "cpu") is None
    assert distill.best_configuration(knob_win(speedup=0.9), seed(speedup=1.0), "softmax", "cpu") is None


def test_best_configuration_without_a_seed_is_still_recorded():
    lesson = distill.best_configuration(knob_win(speedup=2.0), None, "softmax", "cpu")
    assert lesson is not None and "its seed" not in lesson.text


def test_best_configuration_without_knobs_or_speedup_is_none():
    assert distill.best_configuration(attempt("KEEP", 2.0, case={"move": "llm"}), seed(), "softmax", "cpu") is None
    assert distill.best_configuration(attempt("KEEP", 2.0, case={"knobs": {}}), seed(), "softmax", "cpu") is None
    no_speed = attempt("KEEP", None, case={"knobs": {"REPEAT": 1}})
    assert distill.best_configuration(no_speed, seed(), "softmax", "cpu") is None
