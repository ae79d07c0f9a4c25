"""Recorded sessions: what RecordingClient writes, how ReplayClient answers, and what counts as diverging."""

from __future__ import annotations

import json
import re
import threading

import pytest

from kernelkiln.llm.client import LLMError
from kernelkiln.llm.config import LLMConfig
from kernelkiln.llm.messages import Completion, Message, ToolSpec
from kernelkiln.llm.record import RecordingClient
from kernelkiln.llm.replay import (
    RecordingEnded,
    ReplayClient,
    ReplayDiverged,
    difference,
)
from kernelkiln.llm.session import (
    Request,
    SessionHeader,
    read_header,
    read_stream,
    stream_path,
)
from kernelkiln.testing.llm import ScriptedClient
from kernelkiln.testing.sessions import NAMES, SESSIONS

KEY = "sk-test-0123456789abcdefSECRET"
TOOLS = (ToolSpec(name="submit_candidate", description="hand in"),)
TASK_TEXT = "## Task: t\nOp family: softmax.\n```python\nclass Model: ...\n```\n\n## Your lens: vectorize\nplay"


def header() -> SessionHeader:
    return SessionHeader(llm=LLMConfig(model="m", base_url="http://127.0.0.1:9/v1"))


def conversation(system: str = "be fast", user: str = TASK_TEXT) -> list[Message]:
    return [Message(role="system", content=system), Message(role="user", content=user)]


def recorder(tmp_path, inner, agent: str = "a1", task_id: str = "t") -> RecordingClient:
    return RecordingClient(inner, tmp_path, task_id=task_id, agent=agent, header=header(), secrets=[KEY])


def test_every_exchange_is_saved_with_its_request_reply_usage_latency_and_kind(tmp_path):
    submit = {
        "tool_calls": [{"name": "submit_candidate", "arguments": {"code": "x"}}],
        "prompt_tokens": 11,
        "completion_tokens": 3,
    }
    client = recorder(tmp_path, ScriptedClient(["thinking aloud", submit]))
    first = client.complete(conversation(), TOOLS, max_tokens=64)
    client.complete([*conversation(), first.as_message(), Message(role="user", content="again")], TOOLS, 64)
    exchanges = read_stream(tmp_path, "t", "a1")
    assert [(e.number, e.reply) for e in exchanges] == [(1, "text"), (2, "tool")]
    assert exchanges[0].request.messages[0].content == "be fast" and exchanges[0].request.max_tokens == 64
    assert exchanges[0].request.tools == TOOLS and exchanges[0].response.text == "thinking aloud"
    assert (exchanges[1].response.prompt_tokens, exchanges[1].response.completion_tokens) == (11, 3)
    assert all(e.latency_s >= 0 and e.at.endswith("+00:00") for e in exchanges)
    assert read_header(tmp_path).llm.model == "m"
    assert stream_path(tmp_path, "t", "a1").parent.name == "t"


def test_a_failed_call_is_recorded_and_replays_as_the_same_error(tmp_path):
    client = recorder(tmp_path, ScriptedClient([{"status": 404}]))
    with pytest.raises(LLMError) as failed:
        client.complete(conversation(), TOOLS)
    (exchange,) = read_stream(tmp_path, "t", "a1")
    assert exchange.reply == "error" and exchange.response is None and exchange.error == str(failed.value)
    with pytest.raises(LLMError) as replayed:
        ReplayClient(tmp_path, task_id="t", agent="a1").complete(conversation(), TOOLS)
    assert str(replayed.value) == str(failed.value) and type(replayed.value) is LLMError


def test_the_api_key_never_reaches_the_recording(tmp_path):
    class Leaky:
        def complete(self, messages, tools=(), max_tokens=None):
            raise LLMError(f"refused key {KEY}")

    with pytest.raises(LLMError):
        recorder(tmp_path, Leaky()).complete(conversation(), TOOLS)
    text = "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    assert KEY not in text and "[redacted]" in text


def test_a_resumed_recording_appends_and_threads_each_keep_their_own_stream(tmp_path):
    recorder(tmp_path, ScriptedClient(["one"])).complete(conversation(), TOOLS)
    recorder(tmp_path, ScriptedClient(["two"])).complete(conversation(), TOOLS)  # a resumed run
    assert [e.response.text for e in read_stream(tmp_path, "t", "a1")] == ["one", "two"]

    def agent(name: str) -> None:
        client = recorder(tmp_path, ScriptedClient([f"{name}-{i}" for i in range(20)]), agent=name, task_id="u")
        for _ in range(20):
            client.complete(conversation(), TOOLS)

    threads = [threading.Thread(target=agent, args=(f"a{i}",)) for i in range(1, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in ("a1", "a2", "a3"):
        assert [e.response.text for e in read_stream(tmp_path, "u", name)] == [f"{name}-{i}" for i in range(20)]


def test_replay_answers_in_order_then_ends_at_a_turn_start(tmp_path):
    client = recorder(tmp_path, ScriptedClient(["one", "two"]))
    for _ in range(2):
        client.complete(conversation(), TOOLS)
    replay = ReplayClient(tmp_path, task_id="t", agent="a1")
    assert [replay.complete(conversation(), TOOLS).text for _ in range(2)] == ["one", "two"]
    with pytest.raises(RecordingEnded):
        replay.complete(conversation(), TOOLS)
    mid_turn = [*conversation(), Message(role="assistant", content="two"), Message(role="user", content="again")]
    with pytest.raises(ReplayDiverged, match="exchange 3 of a1 on t: the run asked again mid-turn"):
        replay.complete(mid_turn, TOOLS)


def test_an_agent_or_task_never_recorded(tmp_path):
    recorder(tmp_path, ScriptedClient(["one"])).complete(conversation(), TOOLS)
    with pytest.raises(RecordingEnded):  # a2 made no call: it stops at its first turn
        ReplayClient(tmp_path, task_id="t", agent="a2").complete(conversation(), TOOLS)
    with pytest.raises(ReplayDiverged, match=r"recorded no task other \(it holds: t\)"):
        ReplayClient(tmp_path, task_id="other", agent="a1")
    with pytest.raises(LLMError, match="holds no recorded session"):
        ReplayClient(tmp_path / "nothing", task_id="t", agent="a1")


def test_a_session_of_another_format_version_is_refused(tmp_path):
    recorder(tmp_path, ScriptedClient(["one"])).complete(conversation(), TOOLS)
    data = json.loads((tmp_path / "session.json").read_text())
    (tmp_path / "session.json").write_text(json.dumps({**data, "version": 99}))
    with pytest.raises(LLMError, match="format version 99; this kernelkiln reads version 1"):
        ReplayClient(tmp_path, task_id="t", agent="a1")


def request(messages, tools=TOOLS, max_tokens=64) -> Request:
    return Request(messages=tuple(messages), tools=tuple(tools), max_tokens=max_tokens)


def test_measurements_ids_and_memory_may_vary_but_the_task_and_instructions_may_not():
    recorded = request(
        [
            *conversation(user=TASK_TEXT + "\n\n## Feedback\nKEEP 1.52x, a-0123456789abcdef"),
            Message(role="assistant", content="x"),
            Message(role="tool", content="took 3.1 ms", name="profile", tool_call_id="call_1"),
            Message(role="user", content="no adoption record for e-0123456789abcdef; 2 left"),
        ]
    )
    same = request(
        [
            *conversation(user=TASK_TEXT + "\n\n## Feedback\nACCEPT 0.98x, a-fedcba9876543210"),
            Message(role="assistant", content="x"),
            Message(role="tool", content="took 2.7 ms", name="profile", tool_call_id="call_9"),
            Message(role="user", content="no adoption record for e-fedcba9876543210; 1 left"),
        ]
    )
    assert difference(recorded, same) is None

    cases = {
        "message 0 (system) differs": request(conversation(system="be slow")),
        "message 1 (user) differs": request(conversation(user=TASK_TEXT.replace("softmax", "matmul"))),
        "the tools offered differ": request(conversation(), tools=()),
        "max_tokens was 64 in the recording, 32 in the run": request(conversation(), max_tokens=32),
        "message 2 is a user message in the run where the recording has an assistant message": request(
            [*conversation(), Message(role="user", content="x")]
        ),
        "the run sent 2 messages where the recording has 5": request(conversation()),
    }
    base = request(conversation())
    for expected, sent in cases.items():
        against = recorded if expected.startswith(("message 2", "the run sent")) else base
        found = difference(against, sent)
        assert found is not None and expected in found, (expected, found)
        assert "\n" not in found


def test_a_divergence_names_the_exchange_and_the_first_differing_message_on_one_line(tmp_path):
    recorder(tmp_path, ScriptedClient(["one"])).complete(conversation(), TOOLS)
    with pytest.raises(ReplayDiverged) as diverged:
        ReplayClient(tmp_path, task_id="t", agent="a1").complete(conversation(system="be\nslow"), TOOLS)
    line = str(diverged.value)
    assert "diverged at exchange 1 of a1 on t: message 0 (system) differs: recorded 'be fast'" in line
    assert "the run sent 'be slow'" in line and "\n" not in line and diverged.value.exit_code == 2


@pytest.mark.parametrize("name", NAMES)
def test_each_bundled_session_loads_and_replays_its_own_requests(name):
    directory = SESSIONS / name
    header = read_header(directory)
    assert header.llm.model == "scripted"
    streams = sorted(directory.glob("*/*.jsonl"))
    assert streams and all(p.stat().st_size < 200_000 for p in streams)
    for path in streams:
        task_id, agent = path.parent.name, path.stem
        exchanges = read_stream(directory, task_id, agent)
        replay = ReplayClient(directory, task_id=task_id, agent=agent)
        for e in exchanges:
            assert replay.complete(e.request.messages, e.request.tools, e.request.max_tokens) == e.response
        assert replay.remaining == 0
    text = "".join(p.read_text() for p in directory.rglob("*") if p.is_file())
    assert not re.search(r"\bsk-[A-Za-z0-9_-]{8,}", text) and "Bearer" not in text


def test_the_bundled_sessions_cover_tool_and_text_replies_and_two_agents():
    def kinds(name):
        return {
            (p.stem, e.reply, bool(e.request.tools))
            for p in (SESSIONS / name).glob("*/*.jsonl")
            for e in read_stream(SESSIONS / name, p.parent.name, p.stem)
        }

    assert kinds("tools_one_agent") == {("a1", "tool", True)}
    assert {agent for agent, _, _ in kinds("tools_two_agents")} == {"a1", "a2"}
    assert kinds("text_one_agent") == {("a1", "text", False)}
    (text_stream,) = (SESSIONS / "text_one_agent").glob("*/*.jsonl")
    reply = read_stream(SESSIONS / "text_one_agent", text_stream.parent.name, "a1")[0].response.text
    assert "```python" in reply and "\nSummary: " in reply and "```json" in reply


def test_a_completion_with_reasoning_round_trips(tmp_path):
    fields = Completion.model_fields
    extra = {"reasoning": "first, think"} if "reasoning" in fields else {}
    reply = Completion(text="done", prompt_tokens=5, completion_tokens=9, finish_reason="stop", **extra)
    recorder(tmp_path, ScriptedClient([reply])).complete(conversation(), TOOLS)
    assert ReplayClient(tmp_path, task_id="t", agent="a1").complete(conversation(), TOOLS) == reply
