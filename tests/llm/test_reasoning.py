"""Reasoning models: reasoning_content, inline <think> and Anthropic thinking blocks kept apart from the answer."""

import pytest

from kernelkiln.llm import AnthropicClient, LLMConfig, Message, OpenAIClient, ToolSpec
from kernelkiln.llm.messages import estimate_tokens, split_think
from kernelkiln.testing.llm import LoopbackServer, MaxJitter, RecordedSleep

ASK = [Message(role="system", content="You write kernels."), Message(role="user", content="Make it fast.")]
COMPILE = ToolSpec(name="compile", parameters={"type": "object", "properties": {"code": {"type": "string"}}})
THOUGHT = "The rows are short, so one pass with a running max is enough. " * 10


@pytest.fixture(autouse=True)
def no_ambient_keys(monkeypatch):
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)


def openai(server) -> OpenAIClient:
    return OpenAIClient(LLMConfig(model="r1", base_url=server.base_url), sleep=RecordedSleep(), rng=MaxJitter())


def anthropic(server) -> AnthropicClient:
    config = LLMConfig(provider="anthropic", model="claude-test", base_url=server.root_url)
    return AnthropicClient(config, sleep=RecordedSleep(), rng=MaxJitter())


def test_reasoning_content_is_kept_apart_counted_and_not_sent_back():
    reply = {"text": "Tile it.", "reasoning": THOUGHT, "prompt_tokens": 100, "completion_tokens": 400}
    with LoopbackServer([reply, "ok"]) as server:
        client = openai(server)
        completion = client.complete(ASK)
        client.complete([*ASK, completion.as_message(), Message(role="user", content="Again.")])
    assert (completion.text, completion.reasoning) == ("Tile it.", THOUGHT)
    assert completion.completion_tokens == 400
    assistant = server.requests[1].body["messages"][2]
    assert assistant == {"role": "assistant", "content": "Tile it."}


def _bare(message: dict) -> dict:
    """A chat completion with no usage, as some servers send."""
    return {
        "body": {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "r1",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }
    }


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_without_usage_the_estimate_includes_the_reasoning(field):
    with LoopbackServer([_bare({"role": "assistant", "content": "Tile it.", field: THOUGHT})]) as server:
        completion = openai(server).complete(ASK)
    assert completion.reasoning == THOUGHT
    assert completion.completion_tokens == estimate_tokens(THOUGHT + "Tile it.")


def test_inline_think_tags_are_reasoning_not_answer():
    with LoopbackServer([f"<think>{THOUGHT}</think>\n\nTile it."]) as server:
        completion = openai(server).complete(ASK)
    assert (completion.text, completion.reasoning) == ("Tile it.", THOUGHT.strip())


def test_split_think_handles_a_template_opened_think_and_leaves_other_text_alone():
    assert split_think("plan</think>answer") == ("plan", "answer")
    assert split_think("no tags") == ("", "no tags")
    assert split_think("see <think> and </think> in prose") == ("", "see <think> and </think> in prose")


def test_anthropic_thinking_blocks_are_reasoning_and_go_back_before_their_tool_calls():
    reply = {"reasoning": THOUGHT, "tool_calls": [{"name": "compile", "arguments": {"code": "x"}, "id": "t1"}]}
    with LoopbackServer([reply, "ok"]) as server:
        client = anthropic(server)
        completion = client.complete(ASK, tools=[COMPILE])
        answer = Message(role="tool", content="compiled", tool_call_id="t1", name="compile")
        client.complete([*ASK, completion.as_message(), answer], tools=[COMPILE])
    assert completion.reasoning == THOUGHT and completion.text == ""
    assert completion.thinking == ({"type": "thinking", "thinking": THOUGHT, "signature": "sig-1"},)
    assistant = server.requests[1].body["messages"][1]
    assert [b["type"] for b in assistant["content"]] == ["thinking", "tool_use"]
    assert assistant["content"][0]["signature"] == "sig-1"


def test_anthropic_thinking_without_tool_calls_is_not_sent_back():
    with LoopbackServer([{"text": "Tile it.", "reasoning": THOUGHT}, "ok"]) as server:
        client = anthropic(server)
        completion = client.complete(ASK)
        client.complete([*ASK, completion.as_message(), Message(role="user", content="Again.")])
    assert completion.text == "Tile it."
    assert [b["type"] for b in server.requests[1].body["messages"][1]["content"]] == ["text"]
