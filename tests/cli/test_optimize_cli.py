"""`kiln optimize` as a user runs it: output, errors, Ctrl-C and --resume."""

from __future__ import annotations

import json
import os
import re
import signal

from kernelkiln.store import open_store
from kernelkiln.testing.cli import interrupt_at, kiln
from kernelkiln.testing.tasks import TASKS

TINY = str(TASKS / "tiny_softmax.py")
QUICK = ["--threads", "1", "--time-budget", "0.3", "--confirm-budget", "0.3"]


def test_help_teaches_the_targets_policies_and_resume():
    done = kiln("optimize", "--help")
    assert done.returncode == 0
    for word in ("--policy", "--agents", "--budget", "--base-url", "--resume", "best.py", "run.json"):
        assert word in done.stdout


def test_json_prints_run_json_and_best_py_is_written(tmp_path):
    store = f"sqlite:///{tmp_path / 'kiln.db'}"
    done = kiln("optimize", TINY, "--budget", "2", "--store", store, "--out", str(tmp_path / "out"), "--json", *QUICK)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    task = out["tasks"]["tiny_softmax"]
    assert set(task) >= {
        "best_speedup",
        "start_speedup",
        "attempts",
        "verdicts",
        "prompt_tokens",
        "completion_tokens",
        "best",
    }
    assert set(task["verdicts"]) == {"KEEP", "ACCEPT", "REVERT", "REJECT"} and task["attempts"] == 2
    assert os.path.isfile(task["best"]) and json.loads((tmp_path / "out" / "run.json").read_text()) == out
    assert "[tiny_softmax 2/2]" in done.stderr  # progress, one line per judged attempt when not a terminal
    assert "tiny_softmax: judging the best again, timing for 0.3 s" in done.stderr
    assert task["confirmation"]["time_budget_s"] == 0.3 and task["confirmed_speedup"] > 0


def test_the_table_names_each_task_with_its_best_speedup(tmp_path):
    store = f"sqlite:///{tmp_path / 'kiln.db'}"
    done = kiln("optimize", TINY, "--budget", "1", "--store", store, "--out", str(tmp_path / "out"), *QUICK)
    assert done.returncode == 0, done.stderr
    assert "tiny_softmax" in done.stdout and re.search(r"\d+\.\d\dx", done.stdout) and "in search" in done.stdout


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    store = f"sqlite:///{tmp_path / 'kiln.db'}"
    cases = [
        (["optimize", "no_such_task", "--store", store], "no such task"),
        (["optimize", TINY, "--policy", "llm", "--store", store], "needs a model"),
        (["optimize", "--resume", "r-nope", "--store", store], "no optimizer run"),
        (["optimize", TINY, "--resume", "r-nope", "--store", store], "give no TASK"),
        (["optimize", "--store", store], "give a TASK or SUITE"),
        (["optimize", TINY, "--policy", "genius", "--store", store], "policy"),
    ]
    for args, message in cases:
        done = kiln(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_ctrl_c_stops_cleanly_and_resume_finishes_without_repeating_an_attempt(tmp_path):
    db = tmp_path / "kiln.db"
    store = f"sqlite:///{db}"
    # timing up to 2 s per evaluation: the run is still going when a test reading stderr on a busy machine presses
    # Ctrl-C (with 0.3 s the remaining four could finish first, and the run exit 0)
    code, stderr = interrupt_at(
        [
            "optimize",
            TINY,
            "--budget",
            "6",
            "--store",
            store,
            "--out",
            str(tmp_path / "out"),
            "--threads",
            "1",
            "--time-budget",
            "2",
            "--confirm-budget",
            "0.3",
        ],
        "[tiny_softmax 2/6]",
    )
    assert code == 130, stderr
    run_id = re.search(r"--resume (r-[0-9a-f]+)", stderr).group(1)
    done = kiln("optimize", "--resume", run_id, "--store", store, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "done"
    s = open_store(store)
    with s.read() as conn:
        attempts = s.attempts.for_run(conn, run_id)
    assert len(attempts) == 6 and len({a.case.code_hash for a in attempts}) == 6


def test_a_usage_error_prints_usage_not_a_traceback():
    done = kiln("optimize", TINY, "--agents", "99")
    assert done.returncode == 2 and "Traceback" not in done.stderr and "--agents" in done.stderr


def test_sigterm_stops_a_run_as_ctrl_c_does(tmp_path):
    store = f"sqlite:///{tmp_path / 'kiln.db'}"
    code, stderr = interrupt_at(
        ["optimize", TINY, "--budget", "6", "--store", store, "--out", str(tmp_path / "out"), *QUICK],
        "[tiny_softmax 1/6]",
        sig=signal.SIGTERM,
    )
    assert code == 130 and "kiln: interrupted: resume with `kiln optimize --resume" in stderr, stderr


def test_memory_readonly_applies_the_store_writes_nothing_to_it_and_keeps_the_runs_records_in_out(tmp_path):
    import hashlib

    db = tmp_path / "team.db"
    store = f"sqlite:///{db}"
    assert (
        kiln("optimize", TINY, "--budget", "2", "--store", store, "--out", str(tmp_path / "a"), *QUICK).returncode == 0
    )
    open_store(store).close()  # the writer's log folded into the file
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    done = kiln(
        "optimize",
        TINY,
        "--budget",
        "2",
        "--store",
        store,
        "--memory-readonly",
        "--out",
        str(tmp_path / "b"),
        "--json",
        *QUICK,
    )
    assert done.returncode == 0, done.stderr
    assert f"memory lent read-only from {store}" in done.stderr and "[tiny_softmax 1/2] a1 KEEP" in done.stderr
    assert "reuse:" in done.stderr  # the stored best is the first candidate
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    own = open_store(f"sqlite:///{tmp_path / 'b' / 'readonly.db'}")
    with own.read() as conn:
        assert len(own.attempts.for_run(conn, json.loads(done.stdout)["run_id"])) == 2


def test_memory_readonly_from_a_store_that_does_not_exist_is_one_line_and_exit_2(tmp_path):
    done = kiln("optimize", TINY, "--store", f"sqlite:///{tmp_path / 'none.db'}", "--memory-readonly", *QUICK)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"kiln: error: cannot lend store sqlite:///{tmp_path / 'none.db'}: no such file"
    ]
