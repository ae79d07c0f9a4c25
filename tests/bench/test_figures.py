"""An ablation's figures: candidates valued by consensus, incumbent curves, evaluations to 95%, reuse."""

from __future__ import annotations

import pytest

from kernelkiln.bench.figures import Consensus, Step, curve, reach_share, reuse_figures, run_figures, task_figures


def step(code: str, verdict: str, speedup: float | None = None) -> Step:
    return Step(code, verdict, speedup)


def test_a_candidate_is_worth_the_median_of_all_its_measurements_anywhere():
    consensus = Consensus(
        [
            {"t": [step("a", "KEEP", 1.0), step("b", "KEEP", 3.0)]},
            {"t": [step("b", "REVERT", 1.0), step("b", "ACCEPT", 2.0), step("c", "REJECT")]},
        ]
    )
    assert consensus.value("t", "a") == 1.0 and consensus.value("t", "b") == 2.0
    assert consensus.value("t", "c") == 0.0 and consensus.value("u", "a") == 0.0


def test_the_best_known_figure_ignores_a_candidate_measured_once_when_others_were_measured_twice():
    consensus = Consensus(
        [{"t": [step("lucky", "KEEP", 9.0), step("b", "KEEP", 2.0)]}, {"t": [step("b", "KEEP", 2.2)]}]
    )
    assert consensus.best("t") == pytest.approx(2.1)
    assert Consensus([{"t": [step("only", "KEEP", 3.0)]}]).best("t") == 3.0


def test_the_curve_values_the_latest_keep_and_pads_an_early_end_with_its_last_value():
    consensus = Consensus([{"t": [step("a", "KEEP", 1.0), step("b", "KEEP", 2.0), step("c", "REVERT", 4.0)]}])
    steps = [step("x", "REJECT"), step("a", "KEEP", 1.5), step("c", "REVERT", 0.5), step("b", "KEEP", 2.0)]
    assert curve("t", steps, consensus, 6) == [0.0, 1.0, 1.0, 2.0, 2.0, 2.0]


def test_a_noisy_keep_counts_for_what_the_candidate_is_worth_not_what_it_measured_once():
    consensus = Consensus(
        [
            {"t": [step("slow", "KEEP", 1.0)]},
            {"t": [step("slow", "KEEP", 1.0)]},
            {"t": [step("fast", "KEEP", 2.0)]},
            {"t": [step("fast", "KEEP", 2.0)]},
        ]
    )
    lucky = [step("fast", "KEEP", 2.0), step("slow", "KEEP", 2.5)]  # noise made "slow" look faster once
    figures = task_figures("t", lucky, consensus, 2)
    assert figures.final == 1.0 and figures.search_best == 2.5
    assert figures.evals_to_target == 1 and figures.anytime == pytest.approx(1.5)


def test_evaluations_to_95_percent_is_the_budget_plus_one_when_never_reached():
    consensus = Consensus(
        [{"t": [step("a", "KEEP", 1.0), step("a", "KEEP", 1.0), step("b", "KEEP", 2.0), step("b", "KEEP", 2.0)]}]
    )
    assert task_figures("t", [step("a", "KEEP", 1.0)], consensus, 3).evals_to_target == 4
    assert task_figures("t", [step("a", "KEEP"), step("b", "KEEP")], consensus, 3).evals_to_target == 2


def test_run_figures_are_geometric_means_over_tasks():
    consensus = Consensus([{"t": [step("a", "KEEP", 1.0)] * 2, "u": [step("b", "KEEP", 4.0)] * 2}])
    run = run_figures({"t": [step("a", "KEEP")], "u": [step("b", "KEEP")]}, consensus, 2)
    assert run["speedup"] == pytest.approx(2.0) and run["evals_to_95"] == pytest.approx(1.0)
    assert run["normalized"] == {"t": [1.0, 1.0], "u": [1.0, 1.0]}


def test_reuse_counts_evaluations_until_the_first_pass_s_best_is_reached_again():
    consensus = Consensus([{"t": [step("a", "KEEP", 1.0), step("b", "KEEP", 2.0)] * 2}])
    first = {"t": [step("a", "KEEP"), step("b", "KEEP")], "u": [step("a", "KEEP")]}
    second = {"t": [step("b", "KEEP")], "u": [step("x", "REJECT"), step("y", "REJECT")]}
    out = reuse_figures(second, first, consensus, 3)
    assert out["tasks"] == {"t": 1, "u": 4} and out["in_one"] == 1 and out["evaluations_spent"] == 1.5


def test_reach_share_counts_curves_within_95_percent_after_each_evaluation():
    assert reach_share([[0.5, 0.96, 1.0], [0.2, 0.3, 0.95]], 3) == [0.0, 0.5, 1.0]
    assert reach_share([], 3) == []


def test_across_tasks_pairs_each_tasks_mean_over_repeats_and_tests_them_by_wilcoxon():
    from kernelkiln.bench.figures import across_tasks

    def runs(per_task: dict[str, list[float]]) -> dict[int, dict]:
        return {k: {"tasks": {t: {"evals_to_95": v[k]} for t, v in per_task.items()}} for k in range(2)}

    arm = runs({f"t{i}": [1.0, 3.0] for i in range(6)})  # 2 on average
    reference = runs({f"t{i}": [4.0 + i, 6.0 + i] for i in range(6)})  # 5 + i
    out = across_tasks(arm, reference)
    assert out == {"evals_to_95_p": pytest.approx(2 / 64), "tasks": 6, "fewer": 6, "more": 0}
    assert across_tasks(reference, reference)["evals_to_95_p"] is None  # no difference to test
