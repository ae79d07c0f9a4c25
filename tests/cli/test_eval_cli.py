"""`kiln eval` and `kiln tasks` as a user runs them."""

from __future__ import annotations

import json

from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.cli import kiln
from kernelkiln.testing.hostile import HOSTILE
from kernelkiln.testing.tasks import TASKS

QUICK = ["--threads", "1", "--time-budget", "0.5"]


def test_eval_json_reports_a_verdict_with_per_workload_timings():
    done = kiln("eval", str(TASKS / "tiny_softmax.py"), str(CANDIDATES / "softmax_c.py"), *QUICK, "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["verdict"] in {"KEEP", "ACCEPT", "REVERT"} and out["correct"] is True
    assert out["speedup"] > 0 and out["stage"] == "verdict"
    assert [set(w) >= {"speedup", "t_ref_s", "t_cand_s"} for w in out["workloads"]] == [True, True]


def test_eval_on_a_bundled_task_uses_its_seed_and_set_shrinks_it():
    done = kiln("eval", "row_sum", "--set", "batch_size=64", "--set", "dim=64", *QUICK)
    assert done.returncode == 0, done.stderr
    assert "verdict:" in done.stdout and "batch_size=64" in done.stdout
    assert "check: against the float64 oracle; 10 trials, 4 robustness trials on wider inputs" in done.stdout


def test_a_rejected_candidate_still_exits_zero_with_a_null_speedup():
    done = kiln("eval", str(TASKS / "tiny_softmax.py"), str(HOSTILE / "constant_output.py"), *QUICK, "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["verdict"], out["stage"], out["correct"], out["speedup"]) == ("REJECT", "check", False, None)
    assert out["check"]["oracle"] is True and out["check"]["oracle_note"] == ""


def test_unusable_input_is_one_line_and_exit_code_two(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    for args in (
        ["eval", str(broken)],
        ["eval", "no_such_task"],
        ["eval", "row_sum", "--set", "nope=1"],
        ["eval", "row_sum", str(tmp_path / "missing.py")],
    ):
        done = kiln(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr


def test_tasks_json_lists_bundled_tasks_with_paths():
    done = kiln("tasks", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    names = {r["name"] for r in rows}
    assert {"row_softmax", "row_sum", "matmul"} <= names
    assert all(r["path"].endswith(".py") for r in rows)
