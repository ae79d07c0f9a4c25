"""`kiln optimize --record DIR` against a loopback endpoint, then `--policy replay --replay DIR` offline."""

from __future__ import annotations

import json

from kernelkiln.llm.session import read_stream
from kernelkiln.testing.cli import kiln
from kernelkiln.testing.llm import LoopbackServer
from kernelkiln.testing.sessions.make import TINY, submits

QUICK = ["--threads", "1", "--time-budget", "0.3", "--confirm-budget", "0", "--budget", "3", "--json"]
KEY = "sk-test-9f8e7d6c5b4a3210NEVERSHOWN"


def test_record_then_replay_offline_then_a_changed_prompt_is_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    session = tmp_path / "session"
    with LoopbackServer([submits()] * 4) as server:
        done = kiln(
            "optimize",
            str(TINY),
            "--policy",
            "llm",
            "--model",
            "scripted",
            "--base-url",
            server.base_url,
            "--record",
            str(session),
            "--store",
            f"sqlite:///{tmp_path / 'a.db'}",
            "--out",
            str(tmp_path / "a"),
            *QUICK,
        )
        assert done.returncode == 0, done.stderr
        assert KEY in server.requests[-1].headers["authorization"]  # the key was in play
    recorded = json.loads(done.stdout)["tasks"]["tiny_softmax"]
    exchanges = read_stream(session, "tiny_softmax", "a1")
    assert len(exchanges) == 2 and recorded["attempts"] == 3
    assert not any(KEY in p.read_text() for p in session.rglob("*") if p.is_file())

    monkeypatch.delenv("OPENAI_API_KEY")
    done = replay(session, "--store", f"sqlite:///{tmp_path / 'b.db'}", "--out", str(tmp_path / "b"), *QUICK)
    assert done.returncode == 0, done.stderr
    replayed = json.loads(done.stdout)["tasks"]["tiny_softmax"]
    assert replayed["attempts"] == 3
    assert (replayed["prompt_tokens"], replayed["completion_tokens"]) == (
        recorded["prompt_tokens"],
        recorded["completion_tokens"],
    )

    stream = session / "tiny_softmax" / "a1.jsonl"
    first, rest = stream.read_text().split("\n", 1)
    line = json.loads(first)
    line["request"]["messages"][0]["content"] += "\nWrite in verse."
    stream.write_text(json.dumps(line) + "\n" + rest)
    done = replay(session, "--store", f"sqlite:///{tmp_path / 'c.db'}", "--out", str(tmp_path / "c"), *QUICK)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert "diverged at exchange 1 of a1 on tiny_softmax: message 0 (system) differs" in lines[-1], done.stderr
    assert "Traceback" not in done.stderr and sum(line.startswith("kiln: error") for line in lines) == 1

    # A recording made from the task's starting candidate is not replayed from scratch (other prompts): one line,
    # at once.
    done = replay(session, "--from-scratch", "--store", f"sqlite:///{tmp_path / 'd.db'}", *QUICK)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "recorded with starting candidate the task's own, this run has none (--from-scratch)" in done.stderr


def replay(session, *args):
    """``kiln optimize TINY --policy replay --replay SESSION *args``."""
    return kiln("optimize", str(TINY), "--policy", "replay", "--replay", str(session), *args)


def test_replay_without_a_session_is_one_line_and_exit_2(tmp_path):
    store = f"sqlite:///{tmp_path / 'kiln.db'}"
    cases = [
        (["--policy", "replay"], "needs a recorded session"),
        (["--policy", "replay", "--replay", str(tmp_path / "none")], "holds no recorded session"),
        (["--replay", str(tmp_path)], "the tuner policy does not read session: add --policy replay"),
        (["--record", str(tmp_path)], "the tuner policy does not read record: add --policy llm or --policy replay"),
        (["--policy", "llm", "--model", "m", "--replay", str(tmp_path)], "add --policy replay"),
        (["--policy", "replay", "--replay", str(tmp_path), "--record", str(tmp_path)], "same directory"),
    ]
    for args, message in cases:
        done = kiln("optimize", str(TINY), *args, "--store", store)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
