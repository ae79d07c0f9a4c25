"""Long waits for a model: a line past the notice threshold, then at doubling intervals; a retry after a
timeout said, and the try given up counted with its prompt estimated (both SDK clients, loopback server)."""

from __future__ import annotations

import math
import re
import threading
import time

import pytest

from kernelkiln.llm import AnthropicClient, LLMConfig, Message, OpenAIClient
from kernelkiln.llm.messages import estimate_prompt_tokens
from kernelkiln.llm.waiting import StderrWaits, watched
from kernelkiln.testing.llm import LoopbackServer, MaxJitter, RecordedSleep, RecordedWaits

ASK = [Message(role="system", content="You write kernels."), Message(role="user", content="Make it fast.")]


@pytest.fixture(autouse=True)
def no_ambient_keys(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def client_for(server, provider, waits, notice_s=30.0, **fields):
    if provider == "anthropic":
        config = LLMConfig(provider="anthropic", model="m", base_url=server.root_url, **fields)
        return AnthropicClient(config, sleep=RecordedSleep(), rng=MaxJitter(), waits=waits, notice_s=notice_s)
    config = LLMConfig(model="m", base_url=server.base_url, **fields)
    return OpenAIClient(config, sleep=RecordedSleep(), rng=MaxJitter(), waits=waits, notice_s=notice_s)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_request_still_waiting_past_the_notice_threshold_gets_a_line_with_the_time_waited(provider):
    waits = RecordedWaits()
    with LoopbackServer([{"delay_s": 0.6, "text": "late but here"}]) as server:
        reply = client_for(server, provider, waits, notice_s=0.05).complete(ASK)
    assert reply.text == "late but here"
    assert waits.lines, "no line while the request waited"
    assert all(
        re.fullmatch(r"no reply from llm endpoint \S+ after \d+ s \(model m; try 1 of 5, timeout \d+ s\)", line)
        for line in waits.lines
    ), waits.lines
    assert len(waits.spans) == 2 and waits.spans[0] is not None and waits.spans[1] is None
    assert waits.abandoned_tokens == []


def test_a_quick_reply_says_nothing_and_ends_its_wait():
    waits = RecordedWaits()
    with LoopbackServer(["at once"]) as server:
        client_for(server, "openai", waits).complete(ASK)
    assert waits.lines == [] and len(waits.spans) == 2 and waits.spans[-1] is None


def test_notices_come_each_time_the_wait_doubles_not_a_flood():
    waits = RecordedWaits()
    first = 0.02
    started = time.monotonic()
    with watched(waits, lambda seconds: f"{seconds:.3f}", first):
        time.sleep(0.3)
    waited = time.monotonic() - started
    # Due at 0.02, 0.04, 0.08, 0.16 s …: at most one line per doubling of the wait, however long it was.
    assert 1 <= len(waits.lines) <= math.floor(math.log2(waited / first)) + 1
    assert not any(t.name == "llm-wait-notices" for t in threading.enumerate())  # the notice thread ended with it


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_try_given_up_on_the_timeout_is_said_and_counted_with_its_prompt_estimated(provider):
    waits = RecordedWaits()
    with LoopbackServer([{"delay_s": 5, "text": "too late"}, "in time"]) as server:
        reply = client_for(server, provider, waits, timeout_s=0.2, max_retries=1).complete(ASK)
    assert reply.text == "in time" and reply.attempts == 2
    retried = [line for line in waits.lines if "timeout" in line and "asking again" in line]
    assert len(retried) == 1 and "did not answer within the 0.2 s timeout (try 1 of 2)" in retried[0]
    assert "policy.llm.timeout_s" in retried[0]
    assert waits.abandoned_tokens == [estimate_prompt_tokens(ASK)]


def test_a_client_on_its_own_says_its_lines_on_stderr(capsys):
    StderrWaits().say("no reply from llm endpoint http://localhost:8080/v1 after 30 s")
    assert capsys.readouterr().err == "kiln: no reply from llm endpoint http://localhost:8080/v1 after 30 s\n"
