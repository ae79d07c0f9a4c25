"""AnthropicClient through the real anthropic SDK against the loopback server."""

import pytest

from kernelkiln.llm import AnthropicClient, LLMConfig, LLMError, Message, ToolSpec
from kernelkiln.testing.llm import LoopbackServer, MaxJitter, RecordedSleep

COMPILE = ToolSpec(
    name="compile",
    description="Compile a candidate and return the diagnostics.",
    parameters={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
)
FAKE_KEY = "sk-ant-kiln-test-SECRET-9876543210"
ASK = [Message(role="system", content="You write kernels."), Message(role="user", content="Make it fast.")]


@pytest.fixture(autouse=True)
def no_ambient_credentials(monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def client_for(server, sleep=None, **fields):
    config = LLMConfig(provider="anthropic", model="claude-test", base_url=server.root_url, **fields)
    return AnthropicClient(config, sleep=sleep or RecordedSleep(), rng=MaxJitter())


def test_returns_plain_text_reply_with_usage_and_cost():
    with LoopbackServer([{"text": "Tile it.", "prompt_tokens": 2000, "completion_tokens": 100}]) as server:
        client = client_for(server, price_prompt_per_mtok=3.0, price_completion_per_mtok=15.0)
        completion = client.complete(ASK, max_tokens=512)
    assert completion.text == "Tile it."
    assert (completion.prompt_tokens, completion.completion_tokens) == (2000, 100)
    assert completion.cost_usd == pytest.approx((2000 * 3.0 + 100 * 15.0) / 1e6)
    assert completion.finish_reason == "stop"
    assert completion.model == "claude-test"
    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.body["system"] == "You write kernels."
    assert sent.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Make it fast."}]}]
    assert sent.body["max_tokens"] == 512


def test_sends_tools_as_input_schema_and_parses_tool_use_blocks():
    reply = {"text": "Let me check.", "tool_calls": [{"name": "compile", "arguments": {"code": "int f;"}}]}
    with LoopbackServer([reply]) as server:
        completion = client_for(server).complete(ASK, tools=[COMPILE])
    assert server.requests[0].body["tools"] == [
        {"name": "compile", "description": COMPILE.description, "input_schema": COMPILE.parameters}
    ]
    assert completion.text == "Let me check."
    (call,) = completion.tool_calls
    assert (call.name, call.arguments) == ("compile", {"code": "int f;"})
    assert completion.finish_reason == "tool_calls"


def test_sends_tool_use_and_tool_result_blocks_back():
    replies = [
        {
            "tool_calls": [
                {"name": "compile", "arguments": {"code": "a"}},
                {"name": "compile", "arguments": {"code": "b"}},
            ]
        },
        "Both compile.",
    ]
    with LoopbackServer(replies) as server:
        client = client_for(server)
        first = client.complete(ASK, tools=[COMPILE])
        a, b = first.tool_calls
        results = [Message(role="tool", tool_call_id=c.id, content=f"ok {c.id}") for c in (a, b)]
        second = client.complete([*ASK, first.as_message(), *results], tools=[COMPILE])
    assert second.text == "Both compile."
    assistant, user = server.requests[1].body["messages"][1:]
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": a.id, "name": "compile", "input": {"code": "a"}},
            {"type": "tool_use", "id": b.id, "name": "compile", "input": {"code": "b"}},
        ],
    }
    # both results in one user turn: the API wants user and assistant turns to alternate
    assert user == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": a.id, "content": f"ok {a.id}"},
            {"type": "tool_result", "tool_use_id": b.id, "content": f"ok {b.id}"},
        ],
    }


def test_retries_overload_and_rate_limits_with_growing_backoff_and_honours_retry_after():
    script = [{"status": 529}, {"status": 500}, {"status": 429, "retry_after": 5}, "ok"]
    sleep = RecordedSleep()
    with LoopbackServer(script) as server:
        completion = client_for(server, sleep, backoff_s=2.0).complete(ASK)
    assert completion.text == "ok"
    assert completion.attempts == 4
    assert sleep.delays == [2.0, 4.0, 5.0]


def test_does_not_retry_a_bad_request():
    sleep = RecordedSleep()
    script = [{"status": 400, "message": "max_tokens too large"}, "never sent"]
    with LoopbackServer(script) as server, pytest.raises(LLMError) as error:
        client_for(server, sleep).complete(ASK)
    assert str(error.value) == f"llm endpoint {server.root_url} failed: 400 Bad Request: max_tokens too large"
    assert len(server.requests) == 1 and sleep.delays == []


def test_retries_a_timeout_then_fails_naming_it():
    with (
        LoopbackServer([{"delay_s": 5}] * 2) as server,
        pytest.raises(LLMError, match=r"failed after 2 tries: timed out after 0\.2 s"),
    ):
        client_for(server, timeout_s=0.2, max_retries=1).complete(ASK)
    assert len(server.requests) == 2


def test_hosted_endpoint_without_a_key_names_the_variable():
    with pytest.raises(LLMError, match="set the environment variable ANTHROPIC_API_KEY"):
        AnthropicClient(LLMConfig(provider="anthropic", model="claude-test"))


def test_never_shows_the_key_in_errors_or_reprs(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_KEY)
    with LoopbackServer([{"status": 401, "message": f"invalid x-api-key {FAKE_KEY}"}]) as server:
        client = client_for(server)
        with pytest.raises(LLMError) as error:
            client.complete(ASK)
    assert FAKE_KEY in str(server.requests[0].headers)  # it was sent, as it must be
    for text in (str(error.value), repr(client), repr(client.config)):
        assert FAKE_KEY not in text


@pytest.mark.parametrize(("body", "error"), [("not json", "unreadable reply"), ({}, "not the API's")])
def test_a_reply_that_is_not_a_message_is_a_one_line_error(body, error):
    with LoopbackServer([{"body": body}]) as server, pytest.raises(LLMError, match=error) as raised:
        client_for(server).complete(ASK)
    assert "\n" not in str(raised.value)
