"""An endpoint that refuses the tools parameter raises ToolsRejected, a distinct LLMError, and only then."""

import pytest

from kernelkiln.llm import AnthropicClient, LLMConfig, LLMError, Message, OpenAIClient, ToolSpec, ToolsRejected
from kernelkiln.llm.retry import status_failure
from kernelkiln.testing.llm import TOOLS_REJECTED, LoopbackServer, MaxJitter, RecordedSleep

ASK = [Message(role="user", content="Make it fast.")]
COMPILE = ToolSpec(name="compile", parameters={"type": "object", "properties": {"code": {"type": "string"}}})


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


def openai(server, **fields) -> OpenAIClient:
    return OpenAIClient(
        LLMConfig(model="m", base_url=server.base_url, **fields), sleep=RecordedSleep(), rng=MaxJitter()
    )


def test_a_400_naming_tools_is_tools_rejected_with_the_servers_reason():
    with LoopbackServer(["unused"], reject_tools=True) as server, pytest.raises(ToolsRejected) as raised:
        openai(server).complete(ASK, tools=[COMPILE])
    assert isinstance(raised.value, LLMError)
    assert raised.value.detail == f"400 Bad Request: {TOOLS_REJECTED}"
    assert len(server.requests) == 1  # not retried


def test_the_same_endpoint_answers_a_request_without_tools():
    with LoopbackServer(["in text"], reject_tools=True) as server:
        assert openai(server).complete(ASK).text == "in text"


@pytest.mark.parametrize("status", [400, 422])
def test_ollama_and_llama_cpp_refusals_count_too(status):
    script = [{"status": status, "message": "registry.ollama.ai/library/gemma:2b does not support tools"}]
    with LoopbackServer(script) as server, pytest.raises(ToolsRejected):
        openai(server).complete(ASK, tools=[COMPILE])


def test_a_400_about_something_else_or_without_tools_sent_is_a_plain_llm_error():
    script = [
        {"status": 400, "message": "maximum context length is 8192 tokens"},
        {"status": 400, "message": "tools param requires --jinja flag"},
    ]
    with LoopbackServer(script) as server:
        client = openai(server)
        for tools in ([COMPILE], []):
            with pytest.raises(LLMError) as raised:
                client.complete(ASK, tools=tools)
            assert not isinstance(raised.value, ToolsRejected)


def test_failure_rejects_tools_only_for_400_and_422():
    assert status_failure(400, detail="tools param requires --jinja flag").rejects_tools()
    assert status_failure(422, detail="unknown field `tool_choice`").rejects_tools()
    assert not status_failure(500, detail="tool parser crashed").rejects_tools()
    assert not status_failure(400, detail="bad request").rejects_tools()


def test_anthropic_client_raises_it_too():
    config = LLMConfig(provider="anthropic", model="claude-test", base_url="")
    with LoopbackServer([], reject_tools="tools: Extra inputs are not permitted") as server:
        client = AnthropicClient(
            config.model_copy(update={"base_url": server.root_url}), sleep=RecordedSleep(), rng=MaxJitter()
        )
        with pytest.raises(ToolsRejected, match="rejected tool calls"):
            client.complete(ASK, tools=[COMPILE])
