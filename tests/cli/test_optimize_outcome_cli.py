"""`kiln optimize --policy llm`: a run whose model gave no candidate says so (stderr, run.json, report, exit 3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.cli import kiln
from kernelkiln.testing.llm import LoopbackServer
from kernelkiln.testing.tasks import TASKS

RELU = str(TASKS / "tiny_relu.py")  # without --from-scratch its agents start from the generated candidate
CODE = (CANDIDATES / "relu_c.py").read_text()
MODELS = {"GET /v1/models": {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "me"}]}}
PROSE = {"text": "First I will think about the kernel.", "prompt_tokens": 700, "completion_tokens": 40}
SUBMIT = {
    "tool_calls": [{"name": "submit_candidate", "arguments": {"code": CODE, "summary": "scalar", "adoptions": []}}],
    "prompt_tokens": 900,
    "completion_tokens": 300,
}


def optimize(tmp_path, base_url: str, budget: int, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    args = [
        *("optimize", RELU, "--policy", "llm", "--model", "m", "--base-url", base_url, "--reply-protocol", "tools"),
        *("--budget", str(budget), "--store", str(tmp_path / "kiln.db"), "--out", str(tmp_path / "out")),
        *("--threads", "1", "--time-budget", "0.3", "--confirm-budget", "0", "--json"),
        *("--set-config", "llm.max_retries=0", "--set-config", "policy.reasks=0", *extra),
    ]
    return subprocess.run(
        [sys.executable, "-m", "kernelkiln", *args], capture_output=True, text=True, timeout=300, env=env, check=False
    )


def test_a_model_that_never_submits_after_the_seed_exits_3_saying_why_and_the_report_shows_it(tmp_path):
    with LoopbackServer([PROSE] * 3, routes=MODELS) as server:
        done = optimize(tmp_path, server.base_url, 2)
        asked = [r for r in server.requests if r.path.endswith("/chat/completions")]
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr and len(asked) == 3  # three turns, one call each (no re-asks)
    lines = [line for line in done.stderr.splitlines() if "no candidate" in line]
    assert lines == [
        "kiln: tiny_relu: no candidate from the model: a1 stopped after 3 turns in a row without a candidate; "
        "the last turn: the model answered once without calling submit_candidate; this endpoint may not support "
        "tool calls: try --reply-protocol text"
    ]
    task = json.loads(done.stdout)["tasks"]["tiny_relu"]
    assert json.loads((tmp_path / "out" / "run.json").read_text())["tasks"]["tiny_relu"] == task
    assert (task["status"], task["attempts"], task["turns_without_candidate"]) == ("no candidate from the model", 1, 3)
    assert task["start_speedup"] is not None and task["reason"] == lines[0].split("no candidate from the model: ")[1]
    report = kiln("report", str(tmp_path / "out"), "--markdown", "--store", f"sqlite:///{tmp_path / 'kiln.db'}")
    assert report.returncode == 0, report.stderr
    says = "- **tiny\\_relu**: no candidate from the model: a1 stopped after 3 turns in a row without a candidate"
    assert says in report.stdout


def test_a_model_that_fails_one_turn_then_submits_gets_its_candidate_evaluated(tmp_path):
    with LoopbackServer([PROSE, SUBMIT], routes=MODELS) as server:
        done = optimize(tmp_path, server.base_url, 1, "--from-scratch")
    assert done.returncode == 0, done.stderr
    assert "no candidate" not in done.stderr and "nothing was evaluated" not in done.stderr
    assert "tiny_relu: 1 agent, 1 evaluation to go" in done.stderr
    task = json.loads(done.stdout)["tasks"]["tiny_relu"]
    assert (task["status"], task["attempts"], task["turns_without_candidate"]) == ("evaluated", 1, 1)
    assert (task["prompt_tokens"], task["completion_tokens"]) == (1600, 340)


def test_help_says_when_the_exit_code_is_3():
    done = kiln("optimize", "--help")
    assert "3    no task got a candidate" in done.stdout and "only its" in done.stdout
