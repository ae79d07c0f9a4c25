"""The scripted ChatClient and the loopback server's script handling."""

import pytest

from kernelkiln.llm import ChatClient, Completion, LLMConfig, LLMError, Message, ToolCall, ToolSpec
from kernelkiln.testing.llm import LoopbackServer, ScriptedClient, ScriptExhausted

ASK = [Message(role="user", content="Make the softmax faster, please. " * 10)]
COMPILE = ToolSpec(name="compile", description="Compile code.")


def test_is_a_chat_client():
    assert isinstance(ScriptedClient([]), ChatClient)


def test_plays_text_dict_and_completion_replies_in_order():
    given = Completion(text="as given", prompt_tokens=7, completion_tokens=3, model="x")
    client = ScriptedClient(["plain", {"text": "from a dict", "prompt_tokens": 11, "completion_tokens": 2}, given])
    assert client.complete(ASK).text == "plain"
    second = client.complete(ASK)
    assert (second.text, second.prompt_tokens, second.completion_tokens) == ("from a dict", 11, 2)
    assert client.complete(ASK) == given
    assert client.remaining == 0


def test_estimates_tokens_deterministically_when_not_given():
    first = ScriptedClient(["a reply of forty characters, more or less"]).complete(ASK)
    again = ScriptedClient(["a reply of forty characters, more or less"]).complete(ASK)
    assert first.prompt_tokens == again.prompt_tokens == round(len(ASK[0].content) / 4)
    assert first.completion_tokens == round(len("a reply of forty characters, more or less") / 4)
    longer = ScriptedClient(["ok"]).complete([*ASK, Message(role="user", content="more " * 100)])
    assert longer.prompt_tokens > first.prompt_tokens


def test_tool_calls_get_ids_and_malformed_arguments_are_kept_raw():
    client = ScriptedClient(
        [{"tool_calls": [{"name": "compile", "arguments": {"code": "x"}}, {"name": "compile", "arguments": "{oops"}]}]
    )
    good, bad = client.complete(ASK, tools=[COMPILE]).tool_calls
    assert good.id and good.id != bad.id
    assert good.arguments == {"code": "x"} and not good.malformed
    assert bad.arguments == {"_raw": "{oops"} and bad.malformed


def test_callable_replies_see_the_prompt_and_tools():
    def echo(messages, tools):
        return f"{len(messages)} messages, tools: {[t.name for t in tools]}"

    assert ScriptedClient([echo]).complete(ASK, tools=[COMPILE]).text == "1 messages, tools: ['compile']"


def test_records_every_call():
    client = ScriptedClient(["a", "b"])
    client.complete(ASK)
    client.complete(ASK, tools=[COMPILE])
    assert client.calls == [(ASK, []), (ASK, [COMPILE])]


def test_running_past_the_script_fails_clearly():
    client = ScriptedClient(["only one"])
    client.complete(ASK)
    with pytest.raises(ScriptExhausted, match="call 2 but its script has 1 replies"):
        client.complete(ASK)
    assert isinstance(ScriptExhausted("x"), AssertionError)


def test_prices_replies_with_the_given_config():
    config = LLMConfig(model="scripted-pro", price_prompt_per_mtok=1.0, price_completion_per_mtok=2.0)
    completion = ScriptedClient(
        [{"text": "x", "prompt_tokens": 1_000_000, "completion_tokens": 500_000}], config=config
    ).complete(ASK)
    assert completion.cost_usd == pytest.approx(2.0)
    assert completion.model == "scripted-pro"


def test_loopback_server_passes_the_parsed_prompt_to_callable_replies():
    seen = []

    def reply(messages, tools):
        seen.append((messages, tools))
        return "ok"

    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "compile", "arguments": '{"code": "x"}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "fine"},
        ],
        "tools": [
            {"type": "function", "function": {"name": "compile", "description": "Compile code.", "parameters": {}}}
        ],
    }
    with LoopbackServer([reply]) as server:
        status, _, payload = server.respond("/v1/chat/completions", {}, body)
    assert status == 200 and payload["choices"][0]["message"]["content"] == "ok"
    messages, tools = seen[0]
    assert messages[1].tool_calls == (ToolCall(id="c1", name="compile", arguments={"code": "x"}),)
    assert messages[2] == Message(role="tool", content="fine", tool_call_id="c1")
    assert tools == [ToolSpec(name="compile", description="Compile code.", parameters={})]


def test_loopback_server_answers_an_exhausted_script_with_a_clear_error():
    with LoopbackServer([]) as server:
        status, _, payload = server.respond("/v1/messages", {}, {"model": "m", "messages": []})
    assert status == 400
    assert "loopback script exhausted" in payload["error"]["message"]


def test_a_status_entry_fails_like_an_endpoint_that_gave_up():
    client = ScriptedClient([{"status": 503}, "recovered"])
    with pytest.raises(LLMError, match="failed: 503 Service Unavailable"):
        client.complete(ASK)
    assert client.complete(ASK).text == "recovered"
