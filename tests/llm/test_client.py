"""make_client, API-key resolution and the one-line LLMError."""

import sys

import pytest

from kernelkiln.errors import UserError
from kernelkiln.llm import AnthropicClient, LLMConfig, LLMError, OpenAIClient, make_client, resolve_api_key
from kernelkiln.llm.client import is_local


def test_llm_error_is_a_one_line_user_error():
    error = LLMError("llm endpoint x\nfailed:   503")
    assert isinstance(error, UserError)
    assert str(error) == "llm endpoint x failed: 503"


def test_makes_the_client_of_the_configured_provider():
    local = "http://127.0.0.1:9/v1"
    assert isinstance(make_client(LLMConfig(model="m", base_url=local)), OpenAIClient)
    assert isinstance(make_client(LLMConfig(provider="anthropic", model="m", base_url=local)), AnthropicClient)


@pytest.mark.parametrize(("provider", "package"), [("openai", "openai"), ("anthropic", "anthropic")])
def test_a_missing_sdk_is_a_one_line_error_saying_what_to_install(monkeypatch, provider, package):
    monkeypatch.setitem(sys.modules, package, None)  # makes ``import package`` raise ImportError
    with pytest.raises(LLMError) as error:
        make_client(LLMConfig(provider=provider, model="m", base_url="http://localhost:8000/v1"))
    assert str(error.value) == f"the llm policy needs the {package} package: pip install 'kernelkiln[llm]'"


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://localhost:8000/v1", True),
        ("http://127.0.0.1:30000/v1", True),
        ("http://127.8.0.1/v1", True),
        ("http://[::1]:11434/v1", True),
        ("https://api.deepseek.com/v1", False),
        ("http://10.0.0.5:8000/v1", False),
        (None, False),
    ],
)
def test_recognises_local_endpoints(url, local):
    assert is_local(url) is local


def test_reads_the_key_from_the_providers_variable_or_the_configured_one():
    assert resolve_api_key(LLMConfig(model="m"), {"OPENAI_API_KEY": "k1"}) == "k1"
    assert resolve_api_key(LLMConfig(provider="anthropic", model="m"), {"ANTHROPIC_API_KEY": "k2"}) == "k2"
    assert (
        resolve_api_key(LLMConfig(model="m", api_key_env="GLM_KEY"), {"GLM_KEY": "k3", "OPENAI_API_KEY": "x"}) == "k3"
    )


def test_a_local_endpoint_needs_no_key():
    assert resolve_api_key(LLMConfig(model="m", base_url="http://localhost:8000/v1"), {}) == "EMPTY"


def test_a_hosted_endpoint_without_a_key_names_the_variable_only():
    config = LLMConfig(model="m", base_url="https://api.deepseek.com/v1", api_key_env="DEEPSEEK_API_KEY")
    with pytest.raises(LLMError) as error:
        resolve_api_key(config, {"DEEPSEEK_API_KEY": "  "})
    assert (
        str(error.value) == "no API key for https://api.deepseek.com/v1: set the environment variable DEEPSEEK_API_KEY"
    )
