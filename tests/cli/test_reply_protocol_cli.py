"""`kiln optimize --policy llm` against endpoints without tool calling: the text protocol gets candidates evaluated."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.llm import LoopbackServer, text_reply
from kernelkiln.testing.tasks import TASKS

PLAIN = str(TASKS / "tiny_relu.py")  # no seed: every candidate must come from the model
CODE = (CANDIDATES / "relu_c.py").read_text()
# Each reply a different file, so no candidate repeats one already evaluated.
TEXT_ONLY = [
    {
        "text": text_reply(f"{CODE}\n# variant {i}\n", f"scalar relu, variant {i}"),
        "prompt_tokens": 800,
        "completion_tokens": 200,
    }
    for i in range(8)
]


def optimize(tmp_path, base_url: str, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
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
        "--json",
        *extra,
    ]
    return subprocess.run(
        [sys.executable, "-m", "kernelkiln", *args], capture_output=True, text=True, timeout=240, env=env, check=False
    )


def kiln_lines(done: subprocess.CompletedProcess) -> list[str]:
    """The run's notices on stderr, less the context-window line every llm run prints."""
    assert "Traceback" not in done.stderr, done.stderr
    return [
        line
        for line in done.stderr.splitlines()
        if line.startswith("kiln:") and not line.startswith("kiln: context window")
    ]


def test_auto_against_a_text_only_model_switches_once_and_evaluates_its_candidates(tmp_path):
    with LoopbackServer(TEXT_ONLY) as server:
        done = optimize(tmp_path, server.base_url)
        chats = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert done.returncode == 0, done.stderr
    assert kiln_lines(done) == [
        "kiln: the model answered twice in a row without calling a tool: replying in text "
        "from now on (--reply-protocol text)"
    ]
    task = json.loads(done.stdout)["tasks"]["tiny_relu"]
    assert task["attempts"] == 2
    assert [bool(c.get("tools")) for c in chats] == [True, True, False]  # the switching reply was usable text
    assert task["prompt_tokens"] == 800 * len(chats) and task["completion_tokens"] == 200 * len(chats)


def test_auto_against_an_endpoint_that_rejects_tools_replies_in_text(tmp_path):
    with LoopbackServer(TEXT_ONLY, reject_tools=True) as server:
        done = optimize(tmp_path, server.base_url)
        chats = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert done.returncode == 0, done.stderr
    (line,) = kiln_lines(done)
    assert line.startswith('kiln: the endpoint rejected tool calls (400 Bad Request: "auto" tool choice requires')
    assert line.endswith("replying in text from now on (--reply-protocol text)")
    assert json.loads(done.stdout)["tasks"]["tiny_relu"]["attempts"] == 2
    assert [bool(c.get("tools")) for c in chats] == [True, False, False]


def test_reply_protocol_text_never_sends_tools(tmp_path):
    with LoopbackServer(TEXT_ONLY) as server:
        done = optimize(tmp_path, server.base_url, "--reply-protocol", "text")
        chats = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert done.returncode == 0, done.stderr
    assert kiln_lines(done) == []
    assert json.loads(done.stdout)["tasks"]["tiny_relu"]["attempts"] == 2
    assert len(chats) == 2 and not any(c.get("tools") for c in chats)
    assert "text protocol" in chats[0]["messages"][0]["content"]
