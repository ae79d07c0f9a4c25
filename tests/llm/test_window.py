"""The context window probe against a local server playing vLLM, SGLang, llama-server, LM Studio, TGI and Ollama."""

from __future__ import annotations

import time

from kernelkiln.cli.settings import load_settings, with_endpoint_window
from kernelkiln.llm.config import LLMConfig
from kernelkiln.llm.window import Window, probe_context_window
from kernelkiln.testing.llm import LoopbackServer


def _llm(server: LoopbackServer, model: str = "qwen") -> LLMConfig:
    return LLMConfig(model=model, base_url=server.base_url)


def test_vllm_reports_max_model_len_per_model():
    routes = {
        "GET /v1/models": {
            "object": "list",
            "data": [{"id": "other", "max_model_len": 8192}, {"id": "qwen", "max_model_len": 32768}],
        }
    }
    with LoopbackServer([], routes) as server:
        assert probe_context_window(_llm(server)) == Window(32768, f"max_model_len at {server.base_url}/models")
        assert server.requests[0].headers["authorization"].startswith("Bearer ")


def test_ollama_reports_the_context_length_on_its_native_api():
    routes = {
        "GET /v1/models": {"object": "list", "data": [{"id": "qwen", "owned_by": "library"}]},
        "POST /api/show": {"model_info": {"general.architecture": "qwen2", "qwen2.context_length": 40960}},
    }
    with LoopbackServer([], routes) as server:
        window = probe_context_window(_llm(server))
        assert window == Window(40960, f"qwen2.context_length at {server.root_url}/api/show")
        assert next(r for r in server.requests if r.path == "/api/show").body["model"] == "qwen"


def test_ollamas_num_ctx_wins_over_what_the_model_was_trained_for():
    routes = {
        "POST /api/show": {
            "parameters": 'stop "<|im_end|>"\nnum_ctx                        8192',
            "model_info": {"qwen2.context_length": 40960},
        }
    }
    with LoopbackServer([], routes) as server:
        assert probe_context_window(_llm(server)).tokens == 8192


def test_sglang_reports_max_model_len_on_its_model_card():
    card = {"id": "qwen", "object": "model", "owned_by": "sglang", "root": "Qwen/Qwen2.5-7B", "max_model_len": 32768}
    with LoopbackServer([], {"GET /v1/models": {"object": "list", "data": [card]}}) as server:
        assert probe_context_window(_llm(server)) == Window(32768, f"max_model_len at {server.base_url}/models")


def test_llama_server_reports_one_slots_window_at_props():
    props = {"n_ctx": 16384, "total_slots": 2, "default_generation_settings": {"n_ctx": 8192, "params": {}}}
    with LoopbackServer([], {"GET /props": props}) as server:
        window = probe_context_window(_llm(server))
    assert window == Window(8192, f"default_generation_settings.n_ctx at {server.root_url}/props")
    with LoopbackServer([], {"GET /props": {"n_ctx": 4096, "default_generation_settings": {}}}) as server:
        assert probe_context_window(_llm(server)) == Window(4096, f"n_ctx at {server.root_url}/props")


def test_lm_studio_reports_the_window_the_model_was_loaded_with():
    models = {
        "object": "list",
        "data": [
            {"id": "other", "state": "loaded", "max_context_length": 131072, "loaded_context_length": 2048},
            {"id": "qwen", "state": "loaded", "max_context_length": 32768, "loaded_context_length": 8192},
        ],
    }
    with LoopbackServer([], {"GET /api/v0/models": models}) as server:
        window = probe_context_window(_llm(server))
    assert window == Window(8192, f"loaded_context_length at {server.root_url}/api/v0/models")
    unloaded = {"data": [{"id": "qwen", "state": "not-loaded", "max_context_length": 32768}]}
    with LoopbackServer([], {"GET /api/v0/models": unloaded}) as server:
        assert probe_context_window(_llm(server)).tokens == 32768


def test_tgi_reports_max_total_tokens_at_info():
    info = {"model_id": "Qwen/Qwen2.5-7B", "max_input_tokens": 8191, "max_total_tokens": 8192}
    with LoopbackServer([], {"GET /info": info}) as server:
        assert probe_context_window(_llm(server)) == Window(8192, f"max_total_tokens at {server.root_url}/info")


def test_an_endpoint_that_does_not_say_or_is_not_there_is_none_quickly():
    with LoopbackServer([]) as server:
        assert probe_context_window(_llm(server)) is None  # 404s
    started = time.monotonic()
    assert probe_context_window(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1")) is None
    assert probe_context_window(LLMConfig(model="m")) is None  # a hosted API: not asked
    assert probe_context_window(LLMConfig(provider="anthropic", model="m", base_url="http://127.0.0.1:9")) is None
    assert time.monotonic() - started < 5


def test_a_run_probes_once_unless_the_user_set_the_window_and_says_which_it_uses():
    said = []
    routes = {"GET /v1/models": {"data": [{"id": "qwen", "max_model_len": 32768}]}}
    with LoopbackServer([], routes) as server:
        flags = {
            "--policy": "llm",
            "--model": "qwen",
            "--base-url": server.base_url,
        }
        probed = with_endpoint_window(load_settings(None, flags), said.append)
        assert (
            probed.config.policy.llm.context_window == 32768
            and probed.source("policy.llm.context_window") == "endpoint"
        )
        assert said == [f"kiln: context window 32768 tokens (max_model_len at {server.base_url}/models)"]
        chosen = {**flags, "--context-window": 4096}
        kept = with_endpoint_window(load_settings(None, chosen), said.append)
        assert kept.config.policy.llm.context_window == 4096 and len(server.requests) == 1  # not asked
        assert said[1:] == ["kiln: context window 4096 tokens (set by --context-window)"]
        replay = {"--policy": "replay", "--replay": "s"}
        replayed = with_endpoint_window(load_settings(None, replay), said.append)
        assert replayed.source("policy.llm.context_window") == "default" and len(server.requests) == 1  # not asked
    gone = {**flags, "--base-url": "http://127.0.0.1:9/v1"}
    fallback = with_endpoint_window(load_settings(None, gone), said.append)
    assert fallback.config.policy.llm.context_window == 128_000
    assert said[-1] == "kiln: context window 128000 tokens (the default: http://127.0.0.1:9/v1 does not say)"
