"""`kiln ablate`'s runs and figures, end to end on tiny tasks."""

from __future__ import annotations

import json

import pytest

from kernelkiln.bench.ablate import Ablation, anytime, evals_to, incumbent
from kernelkiln.bench.studies import merged, scripted_player, studies
from kernelkiln.llm.messages import Message
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.run import order_tasks
from kernelkiln.store.records import Attempt
from kernelkiln.task import load_task
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.tasks import tiny_suite


def attempt(verdict: str, speedup: float | None = None) -> Attempt:
    return Attempt(task_id="t", verdict=verdict, speedup=speedup)


def test_anytime_speedup_averages_the_incumbent_over_the_budget():
    made = [attempt("REJECT"), attempt("KEEP", 2.0), attempt("ACCEPT", 3.0), attempt("KEEP", 4.0)]
    assert anytime(made, 4) == pytest.approx((0 + 2 + 2 + 4) / 4)
    assert anytime(made[:2], 4) == pytest.approx((0 + 2 + 2 + 2) / 4)  # an exhausted search keeps its best
    assert anytime([attempt("REJECT")], 2) is None


def test_evaluations_to_the_target_count_until_the_incumbent_reaches_it_and_budget_plus_one_if_never():
    made = [attempt("REJECT"), attempt("KEEP", 2.0), attempt("REVERT", 1.0), attempt("KEEP", 4.0)]
    assert incumbent(made, 4) == [0.0, 2.0, 2.0, 4.0]
    curves = {"a": incumbent(made, 4), "b": [1.0, 1.0]}
    assert evals_to(curves, {"a": 3.8, "b": 0.95}, budget=4) == pytest.approx((4 * 1) ** 0.5)
    assert evals_to(curves, {"a": 5.0}, budget=4) == pytest.approx(5)  # never reached: the budget + 1
    assert evals_to(curves, {"a": 0.0, "c": 1.0}, budget=4) is None  # no target, no curve: left out


def test_the_search_study_compares_tpe_with_the_enumerate_search_as_its_reference(tmp_path):
    study = studies(2)["search"]
    assert study.metric == "speedup" and [a.label for a in study.arms] == ["enumerate", "tpe"]
    ablation = Ablation(tmp_path, OptimizeConfig(guard=fast_config(), budget=3))
    assert [ablation.config(study, arm, k=0).search for arm in study.arms] == ["enumerate", "tpe"]


def test_a_patch_merges_nested_settings_and_leaves_the_rest():
    base = {"agents": 1, "memory": {"value": {"eta": 0.2}, "rules": {"beta": 0.1}}}
    patch = studies(3)["credit"].arms[1].patch
    assert merged(base, patch) == {"agents": 1, "memory": {"value": {"eta": 0.2, "credit": "uniform"},
                                                           "rules": {"beta": 0.1}}}


def test_the_scripted_player_submits_distinct_variants_adopting_the_first_experience_shown():
    player = scripted_player((CANDIDATES / "softmax_knobs.py").read_text(), turns=3)
    prompt = [Message(role="system", content="s"), Message(role="user", content="e-0123456789abcdef e-fedcba9876543210")]
    calls = [player.complete(prompt).tool_calls[0].arguments for _ in range(3)]
    assert len({c["code"] for c in calls}) == 3
    assert [(a["experience_id"], a["adopted"]) for a in calls[0]["adoptions"]] == [
        ("e-0123456789abcdef", True), ("e-fedcba9876543210", False)]


@pytest.fixture(scope="module")
def two_tasks():
    with tiny_suite(("tiny_a", "tiny_b")) as folder:
        yield order_tasks([load_task(p) for p in sorted(folder.glob("*.py"))])


def test_an_ablation_runs_shared_arms_once_and_reports_intervals_and_paired_ratios(two_tasks, tmp_path):
    lines = []
    ablation = Ablation(tmp_path, OptimizeConfig(guard=fast_config(), budget=2), progress=lines.append)
    chosen = [studies(2)["memory"], studies(2)["rules"]]
    out = ablation.run(chosen, two_tasks, repeat=2)
    assert json.loads((tmp_path / "ablation.json").read_text()) == out
    assert lines[0].startswith("6 runs to go")  # memory on and rules on are the same runs
    memory = out["studies"]["memory"]
    on, off = memory["arms"]
    assert on["runs"] == out["studies"]["rules"]["arms"][0]["runs"]
    assert all(run["correct"] == 2 and run["evaluations"] == 4 for run in on["runs"] + off["runs"])
    assert on["speedup"]["k"] == 2 and len(on["speedup"]["ci95"]) == 2
    assert memory["ratio"]["speedup"]["k"] == 2 and memory["ratio_of"] == "memory off / memory on"
    assert 1 <= on["evals_to_95"]["mean"] <= 3 and memory["ratio"]["evals_to_95"]["k"] == 2
    assert len((tmp_path / "runs.jsonl").read_text().splitlines()) == 6
    lines.clear()
    assert ablation.run(chosen, two_tasks, repeat=2) == out  # every run is reused from runs.jsonl
    assert lines == ["0 runs to go (6 done earlier), each 2 tasks x 2 evaluations"]


def test_the_memory_off_arm_gives_every_task_an_empty_store(two_tasks, tmp_path):
    Ablation(tmp_path, OptimizeConfig(guard=fast_config(), budget=2), progress=lambda m: None).run(
        [studies(2)["memory"]], two_tasks, repeat=1)
    stores = sorted(p.name for p in (tmp_path / "runs").glob("*/*.db"))
    assert stores == ["suite.db", "tiny_a.db", "tiny_b.db"]


def test_the_context_study_counts_prompt_tokens_of_a_scripted_model(two_tasks, tmp_path):
    out = Ablation(tmp_path, OptimizeConfig(guard=fast_config(), budget=3), progress=lambda m: None).run(
        [studies(2)["context"]], two_tasks[:1], repeat=1)
    study = out["studies"]["context"]
    active, passive = study["arms"]
    assert active["prompt_tokens"]["mean"] > 0 and passive["prompt_tokens"]["mean"] > 0
    assert active["runs"][0]["evaluations"] == 3
    assert study["ratio"]["max_prompt_tokens"]["mean"] > 0 and "speedup" not in study["ratio"]


def test_an_arms_config_keeps_the_base_settings_including_the_ones_turned_off(tmp_path):
    base = OptimizeConfig(guard=fast_config(), budget=7, confirm_time_budget_s=None)
    ablation = Ablation(tmp_path, base)
    off = ablation.config(studies(2)["rules"], studies(2)["rules"].arms[1], k=1)
    assert off.confirm_time_budget_s is None and off.budget == 7 and off.seed == 1
    assert off.memory.rules.budget_tokens == 0 and off.guard == base.guard
    scripted = ablation.config(studies(2)["context"], studies(2)["context"].arms[1], k=0)
    assert scripted.policy == "llm" and scripted.context.mode == "passive"
    assert scripted.guard.time_budget_s <= base.guard.time_budget_s
