"""OpenAIClient through the real openai SDK against the loopback server."""

import socket

import pytest

from kernelkiln.llm import LLMConfig, LLMError, Message, OpenAIClient, ToolSpec
from kernelkiln.testing.llm import LoopbackServer, MaxJitter, RecordedSleep

COMPILE = ToolSpec(
    name="compile",
    description="Compile a candidate and return the diagnostics.",
    parameters={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
)
FAKE_KEY = "sk-kiln-test-SECRET-0123456789"
ASK = [Message(role="system", content="You write kernels."), Message(role="user", content="Make it fast.")]


@pytest.fixture(autouse=True)
def no_ambient_keys(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def client_for(server, sleep=None, **fields):
    config = LLMConfig(model="kiln-test", base_url=server.base_url, **fields)
    return OpenAIClient(config, sleep=sleep or RecordedSleep(), rng=MaxJitter())


def test_returns_plain_text_reply_with_usage_and_cost():
    with LoopbackServer([{"text": "Tile it.", "prompt_tokens": 1000, "completion_tokens": 500}]) as server:
        client = client_for(server, price_prompt_per_mtok=2.0, price_completion_per_mtok=8.0)
        completion = client.complete(ASK)
    assert completion.text == "Tile it."
    assert completion.tool_calls == ()
    assert (completion.prompt_tokens, completion.completion_tokens) == (1000, 500)
    assert completion.cost_usd == pytest.approx((1000 * 2.0 + 500 * 8.0) / 1e6)
    assert completion.model == "kiln-test"
    assert completion.finish_reason == "stop"
    assert completion.attempts == 1
    sent = server.requests[0].body
    assert sent["messages"] == [
        {"role": "system", "content": "You write kernels."},
        {"role": "user", "content": "Make it fast."},
    ]
    assert sent["max_tokens"] == 4096
    assert "tools" not in sent and "temperature" not in sent


def test_sends_per_call_token_limit_and_configured_temperature():
    with LoopbackServer(["ok"]) as server:
        client_for(server, temperature=0.3).complete(ASK, max_tokens=77)
    assert server.requests[0].body["max_tokens"] == 77
    assert server.requests[0].body["temperature"] == 0.3


def test_sends_tools_and_parses_the_tool_call_reply():
    reply = {"tool_calls": [{"name": "compile", "arguments": {"code": "int main(){}"}}]}
    with LoopbackServer([reply]) as server:
        completion = client_for(server).complete(ASK, tools=[COMPILE])
    sent = server.requests[0].body
    assert sent["tool_choice"] == "auto"
    assert sent["tools"] == [{"type": "function", "function": COMPILE.model_dump()}]
    (call,) = completion.tool_calls
    assert (call.name, call.arguments) == ("compile", {"code": "int main(){}"})
    assert call.id
    assert completion.finish_reason == "tool_calls"


def test_sends_tool_calls_and_tool_results_back_in_chat_completions_form():
    replies = [{"tool_calls": [{"name": "compile", "arguments": {"code": "x"}}]}, "It compiles."]
    with LoopbackServer(replies) as server:
        client = client_for(server)
        first = client.complete(ASK, tools=[COMPILE])
        call = first.tool_calls[0]
        answer = Message(role="tool", tool_call_id=call.id, name="compile", content="0 errors")
        second = client.complete([*ASK, first.as_message(), answer], tools=[COMPILE])
    assert second.text == "It compiles."
    assistant, tool = server.requests[1].body["messages"][2:]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": "compile", "arguments": '{"code": "x"}'}}
        ],
    }
    assert tool == {"role": "tool", "tool_call_id": call.id, "content": "0 errors"}


def test_keeps_malformed_tool_arguments_raw_and_sends_them_back_verbatim():
    replies = [{"tool_calls": [{"name": "compile", "arguments": '{"code": "x"'}]}, "ok"]
    with LoopbackServer(replies) as server:
        client = client_for(server)
        first = client.complete(ASK, tools=[COMPILE])
        client.complete([*ASK, first.as_message()])
    assert first.tool_calls[0].arguments == {"_raw": '{"code": "x"'}
    assert first.tool_calls[0].malformed
    assert server.requests[1].body["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"code": "x"'


def test_estimates_tokens_when_the_server_reports_no_usage():
    message = {"role": "assistant", "content": "a reply of some length"}
    body = {"id": "x", "model": "kiln-test", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    with LoopbackServer([{"body": body}]) as server:
        completion = client_for(server, price_prompt_per_mtok=1e6).complete(ASK)
    assert completion.text == "a reply of some length"
    assert completion.prompt_tokens > 0 and completion.completion_tokens > 0
    assert completion.cost_usd == completion.prompt_tokens


def test_retries_server_errors_with_growing_backoff_and_honours_retry_after():
    script = [{"status": 500}, {"status": 503}, {"status": 429, "retry_after": 7}, "finally"]
    sleep = RecordedSleep()
    with LoopbackServer(script) as server:
        completion = client_for(server, sleep, backoff_s=0.5, max_backoff_s=30).complete(ASK)
    assert completion.text == "finally"
    assert completion.attempts == 4
    assert len(server.requests) == 4
    assert sleep.delays == [0.5, 1.0, 7.0]


def test_caps_a_servers_retry_after_at_max_backoff():
    sleep = RecordedSleep()
    with LoopbackServer([{"status": 429, "retry_after": 3600}, "ok"]) as server:
        client_for(server, sleep, max_backoff_s=3).complete(ASK)
    assert sleep.delays == [3]


def test_gives_up_after_the_last_try_with_one_line_error():
    sleep = RecordedSleep()
    with LoopbackServer([{"status": 503}] * 3) as server, pytest.raises(LLMError) as error:
        client_for(server, sleep, max_retries=2).complete(ASK)
    assert str(error.value).startswith(f"llm endpoint {server.base_url} failed after 3 tries: 503 Service Unavailable")
    assert "\n" not in str(error.value)
    assert len(sleep.delays) == 2


@pytest.mark.parametrize(("status", "phrase"), [(400, "400 Bad Request"), (401, "401 Unauthorized")])
def test_does_not_retry_client_errors(status, phrase):
    sleep = RecordedSleep()
    script = [{"status": status, "message": "no such model"}, "never sent"]
    with LoopbackServer(script) as server, pytest.raises(LLMError) as error:
        client_for(server, sleep).complete(ASK)
    assert str(error.value) == f"llm endpoint {server.base_url} failed: {phrase}: no such model"
    assert len(server.requests) == 1
    assert sleep.delays == []


def test_retries_a_timeout_then_fails_naming_it():
    sleep = RecordedSleep()
    with (
        LoopbackServer([{"delay_s": 5, "text": "late"}] * 2) as server,
        pytest.raises(LLMError, match=r"failed after 2 tries: timed out after 0\.2 s"),
    ):
        client_for(server, sleep, timeout_s=0.2, max_retries=1).complete(ASK)
    assert len(server.requests) == 2
    assert len(sleep.delays) == 1


def test_retries_when_the_endpoint_refuses_connections():
    with socket.socket() as probe:  # a port nobody listens on once the probe closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sleep = RecordedSleep()
    config = LLMConfig(model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)
    with pytest.raises(LLMError, match="failed after 2 tries: connection failed"):
        OpenAIClient(config, sleep=sleep).complete(ASK)
    assert len(sleep.delays) == 1


def test_local_endpoint_without_a_key_sends_a_dummy_one():
    with LoopbackServer(["ok"]) as server:
        client_for(server).complete(ASK)
    assert server.requests[0].headers["authorization"] == "Bearer EMPTY"


def test_sends_the_key_from_the_configured_variable(monkeypatch):
    monkeypatch.setenv("KILN_TEST_LLM_KEY", FAKE_KEY)
    with LoopbackServer(["ok"]) as server:
        client_for(server, api_key_env="KILN_TEST_LLM_KEY").complete(ASK)
    assert server.requests[0].headers["authorization"] == f"Bearer {FAKE_KEY}"


def test_hosted_endpoint_without_a_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("KILN_TEST_LLM_KEY", raising=False)
    with pytest.raises(LLMError, match="set the environment variable OPENAI_API_KEY"):
        OpenAIClient(LLMConfig(model="gpt-4o"))
    config = LLMConfig(model="m", base_url="https://llm.example.com/v1", api_key_env="KILN_TEST_LLM_KEY")
    with pytest.raises(LLMError, match="KILN_TEST_LLM_KEY") as error:
        OpenAIClient(config)
    assert "https://llm.example.com/v1" in str(error.value)


def test_never_shows_the_key_in_errors_or_reprs(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    echo = {"status": 401, "message": f"Incorrect API key provided: {FAKE_KEY}"}
    with LoopbackServer([echo, {"status": 500, "message": f"backend saw {FAKE_KEY}"}]) as server:
        client = client_for(server, max_retries=0)
        errors = []
        for _ in range(2):
            with pytest.raises(LLMError) as error:
                client.complete(ASK)
            errors.append(str(error.value))
    assert "Incorrect API key provided: ***" in errors[0]
    for text in [*errors, repr(client), repr(client.config), client.config.model_dump_json()]:
        assert FAKE_KEY not in text


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("<html>gateway says hi</html>", "failed: unreadable reply"),
        ({"choices": []}, "returned no choices"),
        ({"choices": [{"index": 0}]}, "sent a reply that is not the API's"),
    ],
)
def test_a_reply_that_is_not_a_chat_completion_is_a_one_line_error(body, error):
    with LoopbackServer([{"body": body}]) as server, pytest.raises(LLMError, match=error) as raised:
        client_for(server).complete(ASK)
    assert "\n" not in str(raised.value)


def test_asks_openai_itself_for_max_completion_tokens(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    assert OpenAIClient(LLMConfig(model="gpt-4o"))._limit_name == "max_completion_tokens"
