"""`kiln measure` then `kiln ablate --replay`: a space measured by the real guard, resumed, and replayed."""

from __future__ import annotations

import json

from kernelkiln.evaluation.spaces import Dataset
from kernelkiln.testing.cli import kiln
from kernelkiln.testing.tasks import tiny_suite


def test_a_measured_space_resumes_and_a_study_replays_it_without_timing_anything(tmp_path):
    data = tmp_path / "spaces.jsonl"
    with tiny_suite(("tiny_a",)) as suite:
        args = ("measure", str(suite), "--out", str(data), "--rounds", "2", "--time-budget", "0.2")
        done = kiln(*args, "--json")
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["judgements_made"] == 12 and result["planned"]["tiny_a"] == {
            "size": 6,
            "measured": 6,
            "whole": True,
        }
        (value,) = result["tasks"]
        assert value["configs"] == 6 and value["optimum"] is not None
        again = kiln(*args)
        assert again.returncode == 0, again.stderr
        assert "0 judgements made this time" in again.stdout and "opt/start" in again.stdout
        dataset = Dataset(data)
        assert len(dataset.rows) == 12 and {r.round for r in dataset.rows} == {0, 1}
        assert all(r.timed == bool(r.workloads) for r in dataset.rows)

        study = kiln(
            "ablate", str(suite), "--replay", str(data), "--study", "search",
            "--study", "held-out", "--study", "held-out-parts",
            "--budget", "3", "--repeat", "2", "--keep-flat",  # a tiny space may be flat: timing decides
            "--confirm-budget", "0", "--budgets", "1,2", "--out", str(tmp_path / "ab"), "--json",
        )  # fmt: skip
        assert study.returncode == 0, study.stderr
        result = json.loads(study.stdout)
        arms = result["studies"]["search"]["arms"]
        assert [a["arm"] for a in arms] == ["enumerate", "empty store"]
        for arm in [*arms, result["floor"]]:
            assert len(arm["runs"]) == 2 and 0 <= arm["p_optimum"] <= 1
            assert arm["score"] is None or arm["score"]["mean"] <= 1.0 + 1e-9
        held = {a["arm"]: a for a in result["studies"]["held-out"]["arms"]}
        assert set(held["memory, task out"]["vs_arms"]) == {"portfolio, task out", "memory, family out"}
        assert held["memory, task out"]["vs_arms"]["portfolio, task out"]["evals_to_95"]["k"] == 2
        parts = result["studies"]["held-out-parts"]
        assert parts["reference"] == "memory, task out" and len(parts["arms"]) == 3
        assert parts["arms"][0]["runs"] == held["memory, task out"]["runs"]  # one run, shared by both studies
        one = result["by_budget"]["1"]["search"]
        assert set(one) == {"enumerate", "empty store"} and "evals_to_95" in one["empty store"]
        assert set(result["by_budget"]) == {"1", "2"} and "best-of-N" in result["by_budget"]["2"]["floor"]


def test_replaying_a_dataset_that_does_not_exist_is_one_line_and_exit_2(tmp_path):
    with tiny_suite(("tiny_a",)) as suite:
        done = kiln("ablate", str(suite), "--replay", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "ab"))
    assert done.returncode == 2 and "no such dataset" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_budgets_at_or_above_the_run_s_budget_are_one_line_errors(tmp_path):
    with tiny_suite(("tiny_a",)) as suite:
        done = kiln("ablate", str(suite), "--budget", "3", "--budgets", "2,3", "--out", str(tmp_path / "ab"))
    assert done.returncode == 2 and "--budgets: 3 is not between 1" in done.stderr
