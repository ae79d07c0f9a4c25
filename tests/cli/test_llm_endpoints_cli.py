"""`kiln optimize --policy llm` against endpoints that fail as real ones do: each says why in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kernelkiln.testing.llm import LoopbackServer
from kernelkiln.testing.tasks import TASKS

PLAIN = str(TASKS / "tiny_relu.py")  # with --from-scratch: every candidate must come from the model
KEY = "sk-test-0123456789abcdef"


def optimize(tmp_path, base_url: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    env.pop("OPENAI_BASE_URL", None)
    args = [
        "optimize",
        PLAIN,
        "--policy",
        "llm",
        "--model",
        "m",
        "--base-url",
        base_url,
        "--budget",
        "2",
        "--store",
        str(tmp_path / "kiln.db"),
        "--out",
        str(tmp_path / "out"),
        "--threads",
        "1",
        "--time-budget",
        "0.3",
        "--confirm-budget",
        "0",
        "--set-config",
        "llm.max_retries=0",
        "--from-scratch",
        *extra,
    ]
    return subprocess.run(
        [sys.executable, "-m", "kernelkiln", *args], capture_output=True, text=True, timeout=240, env=env, check=False
    )


def error_line(done: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = [
        line for line in done.stderr.splitlines() if line.startswith("kiln: error:") or "nothing was evaluated" in line
    ]
    assert len(lines) == 1, done.stderr
    assert KEY not in done.stderr and KEY not in done.stdout
    return lines[0]


def test_a_model_that_never_submits_is_an_error_with_its_cause_and_its_tokens_counted(tmp_path):
    prose = {
        "text": "Here is my plan: first I will think about the kernel.",
        "prompt_tokens": 700,
        "completion_tokens": 40,
    }
    with LoopbackServer([prose] * 9) as server:  # three turns of three calls: then the agent stops
        done = optimize(tmp_path, server.base_url, "--reply-protocol", "tools", "--json")
        asked = sum(r.path.endswith("/chat/completions") for r in server.requests)
    assert done.returncode == 3, done.stderr
    line = error_line(done)
    assert line.startswith("kiln: tiny_relu: nothing was evaluated:") and "submit_candidate" in line
    task = json.loads(done.stdout)["tasks"]["tiny_relu"]
    assert task["status"] == "no candidate" and task["attempts"] == 0 and "submit_candidate" in task["reason"]
    assert task["turns_without_candidate"] == 3
    # Every call that gave no candidate is counted: re-asks included.
    assert asked >= 2 and task["prompt_tokens"] == 700 * asked and task["completion_tokens"] == 40 * asked
    assert json.loads((tmp_path / "out" / "run.json").read_text())["tasks"]["tiny_relu"] == task


def test_help_documents_the_exit_codes():
    done = subprocess.run(
        [sys.executable, "-m", "kernelkiln", "optimize", "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert "Exit codes" in done.stdout and "3" in done.stdout and "evaluated nothing" in done.stdout


@pytest.mark.parametrize(
    ("status", "message", "says"),
    [
        (404, "The model `m` does not exist", "m"),
        (401, f"Incorrect API key provided: {KEY}", "key"),
    ],
)
def test_an_endpoint_that_refuses_is_one_line_and_exit_2(tmp_path, status, message, says):
    with LoopbackServer([{"status": status, "message": message}] * 4) as server:
        done = optimize(tmp_path, server.base_url, "--reply-protocol", "tools")
    assert done.returncode == 2, done.stderr
    line = error_line(done)
    assert line.startswith("kiln: error:") and str(status) in line and says in line.lower()


def test_an_unreachable_endpoint_is_one_line_and_exit_2(tmp_path):
    with LoopbackServer([]) as server:
        url = server.base_url  # a port that was open a moment ago and is closed now
    done = optimize(tmp_path, url, "--reply-protocol", "tools")
    assert done.returncode == 2, done.stderr
    line = error_line(done)
    assert line.startswith("kiln: error:") and "127.0.0.1" in line


def test_a_model_name_the_server_does_not_list_is_one_line_and_exit_2_before_anything_is_evaluated(tmp_path):
    served = {"GET /v1/models": {"object": "list", "data": [{"id": "qwen2.5-coder-7b", "object": "model"}]}}
    with LoopbackServer([{"text": "never asked"}], served) as server:
        done = optimize(tmp_path, server.base_url, "--json")
        asked = [r.path for r in server.requests]
    assert done.returncode == 2, done.stderr
    line = error_line(done)
    assert "no model named 'm'" in line and "qwen2.5-coder-7b" in line
    assert asked == ["/v1/models"]  # no chat call, and no evaluation
    assert json.loads(done.stdout) == {"status": "refused", "reason": line.removeprefix("kiln: error: ")}
    assert not (tmp_path / "out" / "run.json").exists()


def test_an_unreachable_endpoint_under_json_prints_the_refusal(tmp_path):
    with LoopbackServer([]) as server:
        url = server.base_url  # a port that was open a moment ago and is closed now
    done = optimize(tmp_path, url, "--json")
    assert done.returncode == 2, done.stderr
    refusal = json.loads(done.stdout)
    assert refusal["status"] == "refused" and "does not answer" in refusal["reason"] and url in refusal["reason"]
    assert not (tmp_path / "out" / "run.json").exists()
