import re

import pytest

from kernelkiln.context import ContextBuilder, ContextConfig, TokenEstimator
from kernelkiln.guard.verdict import Verdict, WorkloadResult
from kernelkiln.policy.turn import Snapshot
from kernelkiln.store.records import Attempt, BoardEntry, Rule
from kernelkiln.testing.turns import make_turn, retrieved

HOT = ("task", "lens", "objective", "code", "feedback")


def experiences(count, chars=2_000, prefix="e"):
    return tuple(
        retrieved(
            f"{prefix}-{i:03d}",
            f"lesson {i}: " + "unroll the inner loop " * (chars // 22),
            summary=f"lesson {i}",
            q=0.1,
        )
        for i in range(count)
    )


def knowledge(count, chars=3_000):
    return tuple(
        retrieved(
            f"k-{i:03d}",
            f"note {i}: " + "prefer contiguous loads " * (chars // 24),
            kind="knowledge",
            summary=f"CPU note {i}",
        )
        for i in range(count)
    )


def attempt(i, verdict="REVERT", **fields):
    return Attempt(
        id=f"a-{i:03d}",
        task_id="tiny_softmax",
        verdict=verdict,
        summary=f"try {i}",
        code=f"# candidate {i}\n" + "x = 1\n" * 100,
        **fields,
    )


def piled_turn(**overrides):
    history = tuple(attempt(i) for i in range(6))
    fields = {
        "turn": 7,
        "feedback": history[-1],
        "history": history,
        "experiences": experiences(60),
        "knowledge": knowledge(40),
        "graph": tuple(attempt(100 + i, "KEEP", speedup=1.0 + i / 10) for i in range(20)),
        "board": tuple(
            BoardEntry(id=i, task_id="tiny_softmax", kind="win", summary=f"win {i}", reflection="r" * 900)
            for i in range(30)
        ),
        "rules": (Rule(id="e-rule", text="Always compile with -O3.", tokens=6),),
    }
    fields.update(overrides)
    return make_turn(**fields)


def test_active_prompt_fits_the_window_minus_generation_however_much_memory_piles_up():
    builder = ContextBuilder()
    for window in (6_000, 12_000, 30_000):
        prompt = builder.build(piled_turn(), window=window, generation=1_000, tools_tokens=200)
        assert prompt.estimated_tokens <= window - 1_000
        assert prompt.budget > 0
        assert any(s.truncated for s in prompt.sections if s.layer in ("warm", "cold"))


def test_section_tokens_bound_the_prompt_estimate():
    estimator = TokenEstimator()
    prompt = ContextBuilder(estimator=estimator).build(piled_turn(), window=20_000, generation=1_000, tools_tokens=50)
    system = estimator.estimate(prompt.system) + 50
    assert prompt.estimated_tokens <= system + sum(s.tokens for s in prompt.sections)


def test_warm_layer_is_capped_at_its_share_of_the_budget_and_cold_gets_the_rest():
    prompt = ContextBuilder(ContextConfig(warm_share=0.5)).build(piled_turn(), window=20_000, generation=1_000)
    warm = sum(s.tokens for s in prompt.sections if s.layer == "warm")
    cold = sum(s.tokens for s in prompt.sections if s.layer == "cold")
    assert 0 < warm <= 0.5 * prompt.budget
    assert 0 < cold <= prompt.budget - warm


def test_passive_prompt_grows_turn_over_turn():
    builder = ContextBuilder(ContextConfig(mode="passive"))
    sizes, history = [], ()
    for turn in range(1, 5):
        latest = attempt(turn)
        history = (*history, latest)
        prompt = builder.build(
            make_turn(
                turn=turn + 1,
                feedback=latest,
                history=history,
                experiences=experiences(3, prefix=f"e{turn}"),
                knowledge=knowledge(2),
            ),
            window=8_000,
            generation=1_000,
        )
        sizes.append(prompt.estimated_tokens)
        assert "e1-000" in prompt.user  # shown on the first turn, still there
        assert "# candidate 1" in prompt.user
    assert sizes == sorted(sizes) and len(set(sizes)) == len(sizes)
    assert sizes[-1] > 8_000 - 1_000  # no budget: it outgrows the window
    assert all(not s.truncated for s in prompt.sections)
    assert len(prompt.shown_experiences) == 12


def test_passive_memory_is_kept_per_task_and_agent():
    builder = ContextBuilder(ContextConfig(mode="passive"))
    builder.build(make_turn(agent="a0", experiences=experiences(2, prefix="mine")), window=8_000, generation=1_000)
    other = builder.build(make_turn(agent="a1"), window=8_000, generation=1_000)
    assert "mine-000" not in other.user
    assert other.shown_experiences == ()


def test_hot_layer_is_whole_even_when_the_knowledge_budget_is_zero():
    turn = piled_turn()
    prompt = ContextBuilder().build(turn, window=2_000, generation=1_000)
    assert prompt.budget == 0
    assert [s.name for s in prompt.sections if s.layer == "hot"] == list(HOT)
    assert all(s.items_included == 1 and not s.truncated for s in prompt.sections if s.layer == "hot")
    assert "return torch.softmax(x, dim=1)" in prompt.user  # the reference
    assert turn.code.strip() in prompt.user
    assert turn.lens.playbook.splitlines()[0] in prompt.user
    assert all(s.items_included == 0 and s.tokens == 0 for s in prompt.sections if s.layer in ("warm", "cold"))
    assert prompt.shown_experiences == ()


def test_hot_sections_come_first():
    prompt = ContextBuilder().build(piled_turn(), window=20_000, generation=1_000)
    layers = [s.layer for s in prompt.sections]
    assert layers[: len(HOT)] == ["hot"] * len(HOT)
    assert (
        prompt.user.index("## Task: tiny_softmax")
        < prompt.user.index("## Latest feedback")
        < prompt.user.index("## Your earlier attempts")
        < prompt.user.index("## Retrieved experiences")
    )


def test_shown_experiences_are_exactly_those_in_the_prompt():
    prompt = ContextBuilder(ContextConfig(max_experiences=50)).build(piled_turn(), window=14_000, generation=1_000)
    in_text = {f"e-{i:03d}" for i in range(60) if f"### e-{i:03d}" in prompt.user}
    assert 0 < len(in_text) < 60
    assert set(prompt.shown_experiences) == in_text
    listed = re.search(r"one entry for each of these ids: (.*)\.", prompt.user).group(1).split(", ")
    assert listed == list(prompt.shown_experiences)


def test_items_that_do_not_fit_are_skipped_and_later_smaller_ones_still_added():
    big, small = retrieved("e-big", "huge " * 4_000), retrieved("e-small", "short lesson")
    prompt = ContextBuilder().build(make_turn(experiences=(big, small)), window=6_000, generation=1_000)
    assert prompt.shown_experiences == ("e-small",)
    section = prompt.section("experiences")
    assert (section.items_total, section.items_included, section.truncated) == (2, 1, True)


def test_count_caps_limit_items_even_with_budget_to_spare():
    config = ContextConfig(max_experiences=2, max_board_entries=1, max_graph_attempts=0, max_knowledge=1)
    prompt = ContextBuilder(config).build(piled_turn(), window=1_000_000, generation=1_000)
    counts = {s.name: s.items_included for s in prompt.sections}
    assert (counts["experiences"], counts["board"], counts["graph"], counts["knowledge"]) == (2, 1, 0, 1)
    assert prompt.shown_experiences == ("e-000", "e-001")


def test_rules_are_shown_first_in_the_warm_layer_and_not_repeated_as_experiences():
    rule_as_experience = retrieved("e-rule", "Always compile with -O3 (long form).")
    turn = piled_turn(experiences=(rule_as_experience, *experiences(3)))
    prompt = ContextBuilder().build(turn, window=30_000, generation=1_000)
    warm = [s.name for s in prompt.sections if s.layer == "warm"]
    assert warm[0] == "rules"
    assert "Always compile with -O3." in prompt.user
    assert "e-rule" not in prompt.shown_experiences


def test_recent_history_keeps_the_last_r_earlier_turns_without_repeating_the_feedback():
    prompt = ContextBuilder(ContextConfig(recent_turns=2)).build(piled_turn(), window=1_000_000, generation=1_000)
    assert [f"a-{i:03d}" in prompt.user for i in range(6)] == [False, False, False, True, True, True]
    assert prompt.user.count("### a-005") == 0  # the latest attempt is the feedback, not history
    assert prompt.section("history").items_included == 2


def test_graph_attempts_already_in_view_are_not_repeated():
    history = (attempt(1), attempt(2))
    prompt = ContextBuilder().build(
        make_turn(feedback=history[-1], history=history, graph=(*history, attempt(3))),
        window=100_000,
        generation=1_000,
    )
    assert prompt.section("graph").items_total == 1
    assert prompt.user.count("a-002") == 1


def test_latest_feedback_shows_the_verdict_reason_diagnostics_and_workloads():
    latest = attempt(1, "REJECT", error_class="build")
    verdict = Verdict.reject(
        "build",
        "compile failed",
        diagnostics=[{"severity": "error", "line": 7, "column": 3, "message": "expected ';'"}],
    )
    prompt = ContextBuilder().build(
        make_turn(feedback=latest, history=(latest,), verdict=verdict), window=100_000, generation=1_000
    )
    assert "Attempt a-001: REJECT" in prompt.user
    assert "Reason (build): compile failed" in prompt.user
    assert "line 7:3: error: expected ';'" in prompt.user

    timed = Verdict(
        verdict="KEEP",
        stage="verdict",
        reason="faster",
        correct=True,
        speedup=1.8,
        workloads=[
            WorkloadResult(name="w0", sizes={}, t_ref_s=2e-3, t_cand_s=1e-3, speedup=2.0, spread=0.01, rounds=5, reps=3)
        ],
    )
    prompt = ContextBuilder().build(
        make_turn(feedback=attempt(2, "KEEP"), verdict=timed), window=100_000, generation=1_000
    )
    assert "1.80x over the reference" in prompt.user
    assert "w0: reference 2 ms, yours 1 ms, 2.00x" in prompt.user


def test_feedback_without_a_verdict_falls_back_to_what_the_attempt_recorded():
    latest = attempt(1, "REJECT", error_class="check", case={"stage": "check", "reason": "wrong values in w1"})
    prompt = ContextBuilder().build(make_turn(feedback=latest), window=100_000, generation=1_000)
    assert "Reason (check): wrong values in w1" in prompt.user


@pytest.mark.parametrize("objective", ["correctness", "optimization"])
def test_no_draft_directive_outside_drafting(objective):
    prompt = ContextBuilder().build(make_turn(objective=objective), window=100_000, generation=1_000)
    assert prompt.section("draft") is None
    assert "Draft directive" not in prompt.user


def test_draft_objective_includes_the_directive_and_the_leaderboard():
    board = (
        Snapshot("a1", "tiling", "a-077", 2.5, "8x8 register tiles", "def tiled():\n    pass\n"),
        Snapshot("a2", "fusion", "a-078", 1.7, "one pass", "y = 2\n" * 2_000),
    )
    prompt = ContextBuilder(ContextConfig(code_excerpt_chars=300)).build(
        make_turn(objective="draft", leaderboard=board, best_speedup=2.5), window=100_000, generation=1_000
    )
    draft = prompt.section("draft")
    assert draft is not None and draft.layer == "hot"
    assert "Draft directive" in prompt.user and "Abandon" in prompt.user
    assert "a1 (tiling): 2.50x" in prompt.user and "8x8 register tiles" in prompt.user
    assert "def tiled():" in prompt.user
    assert "more characters" in prompt.user  # the long snapshot is an excerpt
    assert prompt.user.count("y = 2") < 100


def test_system_prompt_is_the_same_every_turn():
    builder = ContextBuilder()
    first = builder.build(make_turn(), window=100_000, generation=1_000)
    later = builder.build(piled_turn(), window=100_000, generation=1_000)
    assert first.system == later.system
    assert "submit_candidate" in first.system and "ModelNew" in first.system
