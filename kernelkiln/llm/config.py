"""Configuration of the LLM endpoint (one node of kernelkiln's configuration tree)."""

from __future__ import annotations

import ipaddress
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
# A CPU server on this machine reads a 4k-token prompt at ~25 tokens/s (160 s) and may write a
# 4,096-token reply at ~10 tokens/s (410 s): one try needs up to ~10 minutes. A hosted API answers
# in seconds, and a try that hangs for two minutes is better retried.
LOCAL_TIMEOUT_S = 600.0
REMOTE_TIMEOUT_S = 120.0


def is_local(base_url: str | None) -> bool:
    """Whether ``base_url`` points at this machine (localhost or a loopback address)."""
    if not base_url:
        return False
    host = urlsplit(base_url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class LLMConfig(BaseModel):
    """Which model to call, where, and how patiently. The API key itself is never stored here."""

    model_config = ConfigDict(extra="forbid")

    provider: Literal["openai", "anthropic"] = Field(
        default="openai",
        description="Wire protocol: 'openai' for any OpenAI-compatible chat-completions endpoint "
        "(OpenAI, vLLM, SGLang, Ollama, DeepSeek, GLM), 'anthropic' for the Anthropic messages API.",
    )
    model: str = Field(description="Model name as the endpoint knows it (e.g. 'gpt-4o', 'Qwen/Qwen3-8B').")
    base_url: str | None = Field(
        default=None,
        description="Endpoint URL (e.g. http://localhost:8000/v1 for vLLM); None means the provider's "
        "hosted API. For 'anthropic' give the root, without /v1.",
    )
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable holding the API key; None means OPENAI_API_KEY or "
        "ANTHROPIC_API_KEY by provider. A local endpoint (localhost, 127.0.0.1, ::1) may run without one.",
    )
    timeout_s: float = Field(
        default=REMOTE_TIMEOUT_S,
        gt=0,
        description="Seconds one HTTP try may take before it is given up and retried. Unless set: "
        f"{LOCAL_TIMEOUT_S:g} for an endpoint on this machine (a CPU server reading a 4k-token prompt at "
        f"25 tokens/s and writing a long reply needs minutes), {REMOTE_TIMEOUT_S:g} for any other.",
    )
    max_retries: int = Field(
        default=4, ge=0, description="Retries after the first try on connection errors, timeouts, 429 and 5xx."
    )
    backoff_s: float = Field(
        default=1.0, ge=0, description="Upper bound of the first retry delay; it doubles each retry (full jitter)."
    )
    max_backoff_s: float = Field(
        default=30.0, ge=0, description="Cap on any retry delay, including one a server asks for with Retry-After."
    )
    temperature: float | None = Field(
        default=None, ge=0, description="Sampling temperature; None leaves it to the endpoint's default."
    )
    max_output_tokens: int = Field(
        default=4096, gt=0, description="Tokens a reply may have, unless a call asks for a different number."
    )
    context_window: int = Field(
        default=128_000,
        gt=0,
        description="The model's context window in tokens, for prompt budgeting. Unless set, a run reads it from "
        "the endpoint where it says (vLLM's and SGLang's max_model_len, llama-server's n_ctx, LM Studio's, TGI's "
        "and Ollama's context length) and falls back to this; a server that refuses a request as too long for a "
        "smaller window is taken at its word.",
    )
    reply_protocol: Literal["auto", "tools", "text"] = Field(
        default="auto",
        description="How the model hands in a candidate. 'tools': a submit_candidate tool call (function "
        "calling; diagnostic tools on offer). 'text': a reply with one ```python block, a 'Summary:' line and a "
        "```json adoption block, for servers without tool calling (no tools are sent). 'auto': tools, switching "
        "to text for the rest of the run when the endpoint rejects tools (HTTP 400/422 naming them) or the "
        "model answers in text twice in a row.",
    )
    price_prompt_per_mtok: float = Field(
        default=0.0, ge=0, description="USD per million prompt (input) tokens, for cost accounting."
    )
    price_completion_per_mtok: float = Field(
        default=0.0, ge=0, description="USD per million completion (output) tokens, for cost accounting."
    )

    @model_validator(mode="before")
    @classmethod
    def _timeout_by_endpoint(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("timeout_s") is None:
            local = is_local(data.get("base_url"))
            return {**data, "timeout_s": LOCAL_TIMEOUT_S if local else REMOTE_TIMEOUT_S}
        return data

    @property
    def key_env(self) -> str:
        """The environment variable the API key is read from."""
        return self.api_key_env or DEFAULT_KEY_ENV[self.provider]

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        """What a call with these token counts costs at the configured prices."""
        return (prompt_tokens * self.price_prompt_per_mtok + completion_tokens * self.price_completion_per_mtok) / 1e6
