"""`kiln ablate` as a user runs it."""

from __future__ import annotations

import json

from kernelkiln.testing.cli import interrupt_at, kiln
from kernelkiln.testing.tasks import tiny_suite


def test_help_teaches_the_studies_and_the_interval():
    done = kiln("ablate", "--help")
    assert done.returncode == 0
    for word in ("memory", "agents", "credit", "rules", "search", "context", "95%", "--repeat", "runs.jsonl"):
        assert word in done.stdout


def test_an_unknown_study_is_one_line_and_exit_2():
    done = kiln("ablate", "cpu", "--study", "luck")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "kiln: error: unknown study 'luck' (known: memory, agents, credit, rules, search, context)"]


def test_an_unknown_task_is_one_line_naming_the_suites_tasks():
    done = kiln("ablate", "cpu", "--tasks", "softmax,nope")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "no task 'nope'" in done.stderr and "row_mean" in done.stderr


def test_a_small_ablation_prints_json_and_a_table(tmp_path):
    with tiny_suite(("tiny_a",)) as suite:
        done = kiln("ablate", str(suite), "--study", "rules", "--budget", "2", "--repeat", "2", "--time-budget",
                    "0.2", "--confirm-budget", "0.2", "--out", str(tmp_path / "ab"), "--json")
        assert done.returncode == 0, done.stderr
        study = json.loads(done.stdout)["studies"]["rules"]
        assert [a["arm"] for a in study["arms"]] == ["rules on", "rules off"] and study["ratio"]["speedup"]["k"] == 2
        table = kiln("ablate", str(suite), "--study", "rules", "--budget", "2", "--repeat", "2", "--time-budget",
                     "0.2", "--confirm-budget", "0.2", "--out", str(tmp_path / "ab"))
    assert table.returncode == 0 and "rules off / rules on" in table.stdout
    assert "0 runs to go (4 done earlier)" in table.stderr


def test_ctrl_c_keeps_finished_runs_and_the_same_command_continues(tmp_path):
    with tiny_suite(("tiny_a",)) as suite:
        # timing up to 2 s: run 2 is still going when a test reading stderr on a busy machine presses Ctrl-C
        args = ["ablate", str(suite), "--study", "rules", "--budget", "2", "--repeat", "1", "--time-budget", "2",
                "--confirm-budget", "0.2", "--out", str(tmp_path / "ab")]
        code, stderr = interrupt_at(args, "[run 2/2]")
        assert code == 130, stderr
        assert "kiln: interrupted: run the same command again to continue" in stderr
        done = kiln(*args)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("1 runs to go (1 done earlier)")


def test_the_table_shows_speed_and_token_studies_each_with_its_own_columns():
    from rich.console import Console

    from kernelkiln.cli.ablate import _table

    cell = {"mean": 1.5, "ci95": [1.2, 1.9], "k": 3}
    evals = {"mean": 12.25, "ci95": [10.0, 15.0], "k": 3}
    speed = {"metric": "speedup", "arms": [{"arm": "memory on", "speedup": cell, "anytime": cell, "evals_to_95": evals},
                                           {"arm": "memory off", "speedup": cell, "anytime": None}],
             "ratio": {"speedup": cell, "anytime": None, "evals_to_95": cell}, "ratio_of": "memory off / memory on"}
    tokens = {"metric": "tokens", "arms": [{"arm": "active", "prompt_tokens": {"mean": 1234.0, "ci95": None, "k": 1},
                                            "max_prompt_tokens": cell}],
              "ratio": {"prompt_tokens": cell, "max_prompt_tokens": cell}, "ratio_of": "passive / active"}
    console = Console(record=True, width=160)
    _table({"tasks": ["a", "b"], "budget": 10, "repeat": 3, "studies": {"memory": speed, "context": tokens}}, console)
    text = console.export_text()
    assert "1.5x [1.2x, 1.9x]" in text and "memory off / memory on" in text and "final speedup" in text
    assert "evaluations to 95%" in text and "12.2 [10.0, 15.0]" in text
    assert "prompt tokens per run" in text and "1,234" in text and "passive / active" in text
