"""Requests fitted to the window a loopback server really has: by its own token count, and by its refusals."""

from __future__ import annotations

import math

import pytest

from kernelkiln.llm import AnthropicClient, LLMConfig, Message, OpenAIClient
from kernelkiln.llm.fit import MIN_REPLY_TOKENS
from kernelkiln.llm.overflow import ContextExceeded
from kernelkiln.testing.llm import LoopbackServer

SYSTEM = "You write fast kernels."
DENSE = 3.0  # the server's tokenizer: three characters a token, where the client's estimate assumes four


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)


def client(server: LoopbackServer, **llm) -> OpenAIClient:
    return OpenAIClient(LLMConfig(model="m", base_url=server.base_url, max_retries=0, **llm))


def prompt(chars: int) -> list[Message]:
    return [Message(role="system", content=SYSTEM), Message(role="user", content="x" * chars)]


def chats(server: LoopbackServer) -> list[tuple[int, int]]:
    """(prompt tokens by the server's count, max_tokens) of every chat request it got."""
    return [
        (math.ceil(sum(len(m["content"]) for m in r.body["messages"]) / DENSE), r.body["max_tokens"])
        for r in server.requests
        if r.path.endswith("/chat/completions")
    ]


def said(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("kiln:")]


def test_the_cap_shrinks_to_what_the_window_leaves_and_the_estimate_learns_the_servers_count(capsys):
    with LoopbackServer(["done"] * 2, window=8192, chars_per_token=DENSE) as server:
        llm = client(server, context_window=8192)  # as probed: the window is known, the token rate is not
        assert llm.complete(prompt(20_000)).text == "done"
        assert llm.complete(prompt(21_000)).text == "done"
    sent = chats(server)
    # The first estimate ran below the server's count: refused once, then sent again with what the window leaves.
    assert len(sent) == 3 and sent[0][0] + sent[0][1] > 8192
    assert all(tokens + cap <= 8192 for tokens, cap in sent[1:])
    # The second call was fitted from the start: the estimate had learned the server's count.
    assert sent[2][1] < 4096
    lines = said(capsys)
    assert len(lines) == 1 and "context window is 8192 tokens" in lines[0] and "--context-window 8192" in lines[0]


def test_a_window_no_route_reported_is_learned_from_the_first_refusal_and_said_once(capsys):
    with LoopbackServer(["done"] * 3, window=8192, chars_per_token=DENSE) as server:
        first, second = client(server), client(server)  # the default window: 128000
        first.complete(prompt(20_000))
        first.complete(prompt(20_000))
        second.complete(prompt(20_000))
    sent = chats(server)
    refused = [s for s in sent if s[0] + s[1] > 8192]
    assert len(refused) == 2  # each client's first request: each learns the window once
    assert first.fit.window == second.fit.window == 8192
    assert sent[1][1] == 8192 - sent[1][0] and sent[2][0] + sent[2][1] <= 8192
    lines = said(capsys)
    assert len(lines) == 1 and "context window is 8192 tokens" in lines[0]


def test_a_prompt_longer_than_the_window_is_context_exceeded_naming_both(capsys):
    with LoopbackServer(["never"], window=4096, refusal="llama.cpp", chars_per_token=DENSE) as server:
        llm = client(server)
        with pytest.raises(ContextExceeded) as refused:
            llm.complete(prompt(20_000))
    assert (refused.value.window, refused.value.prompt_tokens) == (4096, chats(server)[0][0])
    assert len(chats(server)) == 1 and server.remaining == 1  # not sent again: no cap could make it fit
    assert "context window is 4096 tokens" in said(capsys)[0]


def test_no_request_asks_for_more_reply_than_the_window_leaves():
    with LoopbackServer(["done"], window=3000, chars_per_token=DENSE) as server:
        llm = client(server, context_window=3000)
        llm.complete(prompt(4_000))
        with pytest.raises(ContextExceeded, match="context window of 3000 tokens"):
            llm.complete(prompt(12_000))  # the prompt alone all but fills the window: not sent
    sent = chats(server)
    assert all(cap < 4096 for _, cap in sent)  # even before the server's count was known
    assert all(len(r.body["messages"][1]["content"]) == 4_000 for r in server.requests)
    tokens, cap = sent[-1]
    assert tokens + cap <= 3000 and cap >= MIN_REPLY_TOKENS


def test_the_anthropic_client_fits_its_cap_too():
    with LoopbackServer(["done"]) as server:
        llm = AnthropicClient(
            LLMConfig(provider="anthropic", model="m", base_url=server.root_url, max_retries=0, context_window=3000)
        )
        llm.complete(prompt(4_000))
    assert server.requests[0].body["max_tokens"] < 4096
