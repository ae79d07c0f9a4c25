"""The check before a run's first evaluation, against loopback servers that list their models or do not."""

from __future__ import annotations

import pytest

from kernelkiln.llm import LLMConfig, LLMError
from kernelkiln.llm.preflight import check_endpoint
from kernelkiln.testing.llm import LoopbackServer, RouteError

KEY = "sk-test-0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def listing(*ids: str) -> dict:
    return {"GET /v1/models": {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]}}


def test_a_model_the_server_lists_passes_without_a_chat_call():
    with LoopbackServer([], listing("other", "qwen")) as server:
        assert check_endpoint(LLMConfig(model="qwen", base_url=server.base_url)) is None
    assert [r.path for r in server.requests] == ["/v1/models"]


def test_a_name_the_server_does_not_list_is_refused_naming_the_ones_it_has():
    with LoopbackServer([], listing("/models/qwen2.5-0.5b-instruct-q4_k_m.gguf")) as server:
        with pytest.raises(LLMError) as refused:
            check_endpoint(LLMConfig(model="qwen", base_url=server.base_url))
    message = str(refused.value)
    assert "no model named 'qwen'" in message and "/models/qwen2.5-0.5b-instruct-q4_k_m.gguf" in message
    assert "\n" not in message


def test_a_long_list_is_cut_and_counted():
    with LoopbackServer([], listing(*(f"m{i}" for i in range(25)))) as server:
        with pytest.raises(LLMError, match="m9 and 15 more"):
            check_endpoint(LLMConfig(model="qwen", base_url=server.base_url))


def test_ollamas_name_without_a_tag_is_its_latest():
    with LoopbackServer([], listing("qwen2.5-coder:latest")) as server:
        assert check_endpoint(LLMConfig(model="qwen2.5-coder", base_url=server.base_url)) is None


def test_a_server_that_lists_no_models_is_not_held_to_a_name():
    with LoopbackServer([]) as server:  # GET /v1/models: 404
        assert check_endpoint(LLMConfig(model="qwen", base_url=server.base_url)) is None
    with LoopbackServer([], {"GET /v1/models": RouteError(503, "Loading model")}) as server:
        assert check_endpoint(LLMConfig(model="qwen", base_url=server.base_url)) is None


def test_an_endpoint_that_does_not_answer_is_one_line():
    with LoopbackServer([]) as server:
        url = server.base_url  # a port that was open a moment ago and is closed now
    with pytest.raises(LLMError, match="does not answer") as refused:
        check_endpoint(LLMConfig(model="qwen", base_url=url))
    assert url in str(refused.value)


def test_a_refused_key_names_its_variable_never_its_value(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with LoopbackServer([], {"GET /v1/models": RouteError(401, f"Incorrect API key provided: {KEY}")}) as server:
        with pytest.raises(LLMError, match=r"refused the key in \$OPENAI_API_KEY") as refused:
            check_endpoint(LLMConfig(model="qwen", base_url=server.base_url))
    assert KEY not in str(refused.value)


def test_anthropic_resolves_the_name_and_lists_the_others_when_it_does_not():
    anthropic = {
        "GET /v1/models/claude-sonnet-4-5": {"id": "claude-sonnet-4-5-20250929", "type": "model"},
        "GET /v1/models": {"data": [{"id": "claude-sonnet-4-5-20250929", "type": "model"}], "has_more": False},
    }
    with LoopbackServer([], anthropic) as server:
        config = LLMConfig(provider="anthropic", model="claude-sonnet-4-5", base_url=server.root_url)
        assert check_endpoint(config) is None
        with pytest.raises(LLMError, match="no model named 'claude-sonet-4-5'; it has claude-sonnet-4-5-20250929"):
            check_endpoint(config.model_copy(update={"model": "claude-sonet-4-5"}))
    with LoopbackServer([]) as server:  # an Anthropic-compatible server without the models API
        assert check_endpoint(LLMConfig(provider="anthropic", model="m", base_url=server.root_url)) is None
