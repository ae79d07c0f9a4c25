"""The text reply protocol's strict parser: one python block, one Summary line, the adoption JSON."""

from __future__ import annotations

import pytest

from kernelkiln.agents.reply import parse_text_reply
from kernelkiln.policy.turn import Choice
from kernelkiln.store.records import SUMMARY_CHARS
from kernelkiln.testing.llm import text_reply
from kernelkiln.testing.turns import START_CODE

CODE = START_CODE.strip()


def parts(problems) -> list[str]:
    return [p.part for p in problems]


def test_a_complete_reply_gives_code_summary_choices_in_shown_order_and_notes():
    text = text_reply(CODE, "restrict and unroll", adopted=["e-2"], not_adopted=["e-1"], prose="I unrolled it.")
    reply, problems = parse_text_reply(text, ("e-1", "e-2"))
    assert problems == []
    assert reply.code == CODE and reply.summary == "restrict and unroll"
    assert reply.choices == (Choice("e-1", False, "does not apply"), Choice("e-2", True, ""))
    assert reply.notes == "I unrolled it."


def test_without_shown_experiences_the_json_block_may_be_left_out():
    reply, problems = parse_text_reply(f"```python\n{CODE}\n```\nSummary: tile it\n", ())
    assert problems == [] and reply.choices == ()


def test_markdown_around_the_summary_and_a_long_summary_are_tolerated_and_clipped():
    reply, _ = parse_text_reply(f"```py\n{CODE}\n```\n**Summary:** {'x' * 400}\n", ())
    assert reply.summary == "x" * SUMMARY_CHARS


def test_adopted_entries_may_carry_a_why_and_ids_not_shown_are_ignored():
    text = (
        f"```python\n{CODE}\n```\nSummary: s\n```json\n"
        '{"adopted": [{"id": "e-1", "why": "used it"}, "e-ghost"], "not_adopted": []}\n```\n'
    )
    reply, problems = parse_text_reply(text, ("e-1",))
    assert problems == [] and reply.choices == (Choice("e-1", True, "used it"),)


def test_other_fences_are_prose_and_a_summary_inside_a_fence_does_not_count():
    text = f"```c\nSummary: not this\n```\n```python\n{CODE}\n# Summary: nor this\n```\n"
    reply, problems = parse_text_reply(text, ())
    assert reply is None and parts(problems) == ["Summary line"]


@pytest.mark.parametrize(
    ("text", "part", "words"),
    [
        ('Summary: s\n```json\n{"adopted": ["e-1"]}\n```\n', "python block", "no ```python block"),
        (
            f'```python\n{CODE}\n```\n```python\n{CODE}\n```\nSummary: s\n```json\n{{"adopted": ["e-1"]}}\n```\n',
            "python block",
            "2 ```python blocks",
        ),
        (
            '```python\nprint(\'hi\')\n```\nSummary: s\n```json\n{"adopted": ["e-1"]}\n```\n',
            "python block",
            "defining ModelNew",
        ),
        (f'```python\n{CODE}\n```\n```json\n{{"adopted": ["e-1"]}}\n```\n', "Summary line", "no `Summary: ...` line"),
        (
            f'```python\n{CODE}\n```\nSummary: a\nSummary: b\n```json\n{{"adopted": ["e-1"]}}\n```\n',
            "Summary line",
            "2 Summary lines",
        ),
    ],
)
def test_a_missing_repeated_or_garbled_part_is_a_problem_never_a_guess(text, part, words):
    reply, problems = parse_text_reply(text, ("e-1",))
    assert reply is None
    assert part in parts(problems)
    assert any(words in p.text for p in problems), problems


def test_every_problem_is_named_at_once():
    _, problems = parse_text_reply("I would unroll the loop.", ("e-1",))
    assert parts(problems) == ["python block", "Summary line"]


@pytest.mark.parametrize(
    ("text", "part", "words"),
    [
        (f"```python\n{CODE}\n```\nSummary: s\n", "adoption JSON", "no ```json block"),
        (
            f'```python\n{CODE}\n```\nSummary: s\n```json\n{{"adopted": ["e-1",]}}\n```\n',
            "adoption JSON",
            "not valid JSON",
        ),
        (f'```python\n{CODE}\n```\nSummary: s\n```json\n["e-1"]\n```\n', "adoption JSON", '{"adopted": [ids]'),
        (
            f'```python\n{CODE}\n```\nSummary: s\n```json\n{{"adopted": []}}\n```\n',
            "adoption JSON",
            "no adoption record for e-1",
        ),
        (
            f'```python\n{CODE}\n```\nSummary: s\n```json\n{{"adopted": ["e-1"], "not_adopted": [{{"id": "e-1"}}]}}'
            "\n```\n",
            "adoption JSON",
            "listed more than once: e-1",
        ),
    ],
)
def test_an_absent_or_garbled_adoption_record_keeps_the_candidate_and_its_ids_are_not_stated(text, part, words):
    reply, problems = parse_text_reply(text, ("e-1",))
    assert problems == [] and reply is not None and "ModelNew" in reply.code and reply.summary == "s"
    assert reply.choices == () and reply.not_stated == ("e-1",)
    assert part == "adoption JSON" and any(words in p for p in reply.record_problems), reply.record_problems


def test_a_partial_record_states_the_ids_it_names_and_leaves_the_rest_not_stated():
    text = f'```python\n{CODE}\n```\nSummary: s\n```json\n{{"adopted": ["e-2"]}}\n```\n'
    reply, problems = parse_text_reply(text, ("e-1", "e-2"))
    assert problems == [] and [c.experience_id for c in reply.choices] == ["e-2"] and reply.not_stated == ("e-1",)


def test_an_unclosed_python_fence_runs_to_the_end_and_hides_a_summary_after_it():
    _, problems = parse_text_reply(f"```python\n{CODE}\nSummary: s\n", ())
    assert parts(problems) == ["Summary line"]
