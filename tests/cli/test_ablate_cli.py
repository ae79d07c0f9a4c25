"""`kiln ablate` as a user runs it."""

from __future__ import annotations

import json

from kernelkiln.testing.cli import interrupt_at, kiln
from kernelkiln.testing.tasks import tiny_suite


def test_help_teaches_the_studies_and_the_interval():
    done = kiln("ablate", "--help")
    assert done.returncode == 0
    for word in (
        "memory",
        "transfer",
        "reuse",
        "agents",
        "credit",
        "rules",
        "search",
        "context",
        "held-out",
        "held-out-parts",
        "--replay",
        "--budgets",
        "best-of-N",
        "consensus",
        "95%",
        "--repeat",
        "runs.jsonl",
        "kiln report DIR",
    ):
        assert word in done.stdout


def test_an_unknown_study_is_one_line_and_exit_2():
    done = kiln("ablate", "cpu", "--study", "luck")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "kiln: error: unknown study 'luck' "
        "(known: memory, held-out, held-out-parts, transfer, reuse, credit, rules, agents, search, context)"
    ]


def test_an_unknown_task_is_one_line_naming_the_suites_tasks():
    done = kiln("ablate", "cpu", "--tasks", "softmax,nope")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "no task 'nope'" in done.stderr and "row_mean" in done.stderr


def test_a_small_ablation_prints_json_and_a_table(tmp_path):
    with tiny_suite(("tiny_a",)) as suite:
        done = kiln(
            "ablate",
            str(suite),
            "--study",
            "search",
            "--budget",
            "2",
            "--repeat",
            "2",
            "--time-budget",
            "0.2",
            "--confirm-budget",
            "0",
            "--out",
            str(tmp_path / "ab"),
            "--json",
        )
        assert done.returncode == 0, done.stderr
        study = json.loads(done.stdout)["studies"]["search"]
        assert [a["arm"] for a in study["arms"]] == ["enumerate", "empty store"]
        assert study["arms"][1]["ratio"]["speedup"]["k"] == 2
        table = kiln(
            "ablate",
            str(suite),
            "--study",
            "search",
            "--budget",
            "2",
            "--repeat",
            "2",
            "--time-budget",
            "0.2",
            "--confirm-budget",
            "0",
            "--out",
            str(tmp_path / "ab"),
        )
    assert table.returncode == 0 and "empty store / enumerate" in table.stdout and "best-of-N" in table.stdout
    assert "0 runs to go (6 done earlier)" in table.stderr


def test_ctrl_c_keeps_finished_runs_and_the_same_command_continues(tmp_path):
    with tiny_suite(("tiny_a",)) as suite:
        # timing up to 2 s: run 2 is still going when a test reading stderr on a busy machine presses Ctrl-C
        args = [
            "ablate",
            str(suite),
            "--study",
            "search",
            "--budget",
            "2",
            "--repeat",
            "1",
            "--time-budget",
            "2",
            "--confirm-budget",
            "0",
            "--out",
            str(tmp_path / "ab"),
        ]
        code, stderr = interrupt_at(args, "[run 2/3]")
        assert code == 130, stderr
        assert "kiln: interrupted: run the same command again to continue" in stderr
        done = kiln(*args)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("2 runs to go (1 done earlier)")


def test_the_table_shows_speed_and_token_studies_each_with_its_own_columns_and_the_floor():
    from rich.console import Console

    from kernelkiln.cli.ablate import _table

    cell = {"mean": 1.5, "ci95": [1.2, 1.9], "k": 3}
    evals = {"mean": 12.25, "ci95": [10.0, 15.0], "k": 3}
    ratio = {"speedup": cell, "anytime": None, "evals_to_95": cell}
    speed = {
        "metric": "speedup",
        "reference": "empty store",
        "arms": [
            {"arm": "empty store", "speedup": cell, "anytime": cell, "evals_to_95": evals, "vs_floor": ratio},
            {"arm": "memory", "speedup": cell, "anytime": None, "ratio": ratio, "vs_floor": {**ratio, "anytime": cell}},
        ],
    }
    tokens = {
        "metric": "tokens",
        "reference": "active",
        "arms": [
            {"arm": "active", "prompt_tokens": {"mean": 1234.0, "ci95": None, "k": 1}, "max_prompt_tokens": cell},
            {
                "arm": "passive",
                "prompt_tokens": cell,
                "max_prompt_tokens": cell,
                "ratio": {"prompt_tokens": cell, "max_prompt_tokens": cell},
            },
        ],
    }
    reuse = {
        "metric": "reuse",
        "evaluations_to_first_best": {"mean": 1.1, "ci95": [1.0, 1.2], "k": 3},
        "second_pass_budget": 3,
        "in_one": [2, 2, 1],
    }
    floor = {"arm": "best-of-N", "speedup": cell, "anytime": cell, "evals_to_95": evals}
    console = Console(record=True, width=200)
    _table(
        {
            "tasks": ["a", "b"],
            "budget": 10,
            "repeat": 3,
            "floor": floor,
            "studies": {"memory": speed, "context": tokens, "reuse": reuse},
        },
        console,
    )
    text = console.export_text()
    assert "1.5x [1.2, 1.9]" in text and "memory / empty store" in text and "final speedup" in text
    assert "evaluations to 95%" in text and "12.2 [10.0, 15.0]" in text and "best-of-N" in text
    assert "prompt tokens per run" in text and "1,234" in text and "passive / active" in text
    assert "1.1 [1.0, 1.2] evaluations per task" in text


def test_a_replay_leaves_out_the_tasks_its_dataset_did_not_measure_and_says_so(tmp_path):
    from kernelkiln.task import knobs as K
    from kernelkiln.task import load_task
    from kernelkiln.testing.candidates import CANDIDATES
    from kernelkiln.testing.spaces import made_up

    seed = (CANDIDATES / "softmax_knobs.py").read_text()
    with tiny_suite(("tiny_a", "tiny_b")) as suite:
        task = load_task(suite / "tiny_a.py")
        own = K.settings_of(K.read_knobs(seed))
        made_up(tmp_path / "d.jsonl", task, seed, {K.key(own): 1.2, K.key({**own, "REPEAT": 1}): 1.5})
        common = ("--study", "search", "--budget", "2", "--repeat", "1", "--replay", str(tmp_path / "d.jsonl"))
        done = kiln("ablate", str(suite), *common, "--out", str(tmp_path / "ab"), "--json")
        named = kiln("ablate", str(suite), "--tasks", "tiny_b", *common, "--out", str(tmp_path / "ab2"))
    assert done.returncode == 0, done.stderr
    assert "left out, not measured in" in done.stderr and "tiny_b" in done.stderr
    assert json.loads(done.stdout)["tasks"] == ["tiny_a"]  # --json's output is JSON only
    assert named.returncode == 2 and "holds no measured space of tiny_b" in named.stderr


def test_a_replay_leaves_out_flat_spaces_and_says_so_unless_told_to_keep_them(tmp_path):
    from kernelkiln.task import knobs as K
    from kernelkiln.task import load_task
    from kernelkiln.testing.candidates import CANDIDATES
    from kernelkiln.testing.spaces import made_up

    seed = (CANDIDATES / "softmax_knobs.py").read_text()
    own = K.settings_of(K.read_knobs(seed))
    other = K.key({**own, "REPEAT": 1})
    with tiny_suite(("tiny_a", "tiny_b")) as suite:
        a, b = (load_task(suite / f"{n}.py") for n in ("tiny_a", "tiny_b"))
        made_up(tmp_path / "d.jsonl", a, seed, {K.key(own): 1.2, other: 1.5})
        made_up(tmp_path / "d.jsonl", b, seed, {K.key(own): 1.5, other: 1.49})  # the seed is the optimum
        common = ("--study", "search", "--budget", "2", "--repeat", "1", "--replay", str(tmp_path / "d.jsonl"))
        left = kiln("ablate", str(suite), *common, "--out", str(tmp_path / "ab"), "--json")
        kept = kiln("ablate", str(suite), *common, "--keep-flat", "--out", str(tmp_path / "ab2"), "--json")
        only = kiln("ablate", str(suite), "--tasks", "tiny_b", *common, "--out", str(tmp_path / "ab3"))
    assert left.returncode == 0, left.stderr
    assert "left out, flat" in left.stderr and "tiny_b" in left.stderr
    assert json.loads(left.stdout)["tasks"] == ["tiny_a"]
    assert kept.returncode == 0 and json.loads(kept.stdout)["tasks"] == ["tiny_a", "tiny_b"]
    assert only.returncode == 2 and "is flat: nothing to search" in only.stderr
