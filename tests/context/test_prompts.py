import jinja2
import pytest

from kernelkiln.context.prompts import excerpt, render
from kernelkiln.store.records import SUMMARY_CHARS


@pytest.mark.parametrize("platform", ["cpu", "cuda"])
def test_system_prompt_explains_the_candidate_and_the_submit_tool(platform):
    text = render("system", platform=platform, summary_chars=SUMMARY_CHARS)
    for needle in (
        "ModelNew",
        "submit_candidate",
        "summary",
        "adoptions",
        "experience_id",
        "run_checks",
        "profile",
        "vectorization_report",
        "from kernelkiln import native",
        "160",
    ):
        assert needle in text
    assert "native.load(" in text
    assert ('lang="cuda"' in text and "@triton.jit" in text) == (platform == "cuda")


def test_the_cpu_prompt_accepts_kernelbenchs_load_inline_form_and_says_which_compiles_faster():
    text = render("system", platform="cpu", summary_chars=SUMMARY_CHARS)
    assert "from torch.utils.cpp_extension import load_inline" in text
    assert "Prefer `native.load`" in text and "half a minute" in text
    assert "load_inline" not in render("system", platform="cuda", summary_chars=SUMMARY_CHARS)


def test_reask_lists_each_problem_and_the_ids_owed():
    text = render(
        "reask.md.j2",
        problems=["no call of submit_candidate", "summary has 212 characters"],
        experience_ids=["e-1", "e-2"],
        summary_chars=160,
    )
    assert "- no call of submit_candidate\n" in text and "- summary has 212 characters\n" in text
    assert "e-1, e-2" in text


def test_reask_without_retrieved_experiences_asks_for_empty_adoptions():
    assert "empty list" in render("reask", problems=["no code"], summary_chars=160)


def test_draft_without_other_agents_says_so():
    text = render("draft", leaderboard=[], best_speedup=None, code_chars=100)
    assert "Abandon" in text and "No other agent" in text


def test_a_missing_value_is_an_error_not_a_blank():
    with pytest.raises(jinja2.UndefinedError):
        render("reask")


def test_excerpt_cuts_at_a_line_end_and_says_how_much_is_left():
    assert excerpt("short", 10) == "short"
    assert excerpt("line one\nline two\n", 12) == "line one\n# … 10 more characters"
