"""A chat client for any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, SGLang, Ollama, …).

Reasoning models' reasoning arrives as ``message.reasoning_content`` (DeepSeek, vLLM and SGLang
reasoning parsers), ``message.reasoning`` (newer vLLM, OpenRouter) or inline ``<think>…</think>``
(servers without a parser); it goes to ``Completion.reasoning`` and is never sent back, as
DeepSeek's API requires.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from kernelkiln.llm.client import LLMError, reading_reply
from kernelkiln.llm.config import LLMConfig
from kernelkiln.llm.messages import (
    Completion,
    Message,
    ToolCall,
    ToolSpec,
    estimate_completion_tokens,
    estimate_prompt_tokens,
    parse_arguments,
    split_think,
)
from kernelkiln.llm.sdk_client import SDKClient, Sent
from kernelkiln.llm.waiting import FIRST_NOTICE_S, WaitListener


class OpenAIClient(SDKClient):
    """``ChatClient`` over the official ``openai`` SDK, with kernelkiln's retry loop instead of the SDK's."""

    def __init__(
        self,
        config: LLMConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        waits: WaitListener | None = None,
        notice_s: float = FIRST_NOTICE_S,
    ) -> None:
        """``waits`` hears of long waits, after ``notice_s`` seconds (default: lines on stderr)."""
        import openai

        super().__init__(config, openai, openai.OpenAI, sleep=sleep, rng=rng, waits=waits, notice_s=notice_s)
        # OpenAI's own API wants max_completion_tokens (its reasoning models reject max_tokens);
        # the compatible servers all know max_tokens, not all know the newer name.
        official = urlsplit(self.endpoint).hostname == "api.openai.com"
        self._limit_name = "max_completion_tokens" if official else "max_tokens"

    def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), max_tokens: int | None = None
    ) -> Completion:
        """The model's next reply, its cap fitted to the window; LLMError when the endpoint fails for good."""
        request: dict[str, Any] = {"model": self.config.model, "messages": [to_openai_message(m) for m in messages]}
        if self.config.temperature is not None:
            request["temperature"] = self.config.temperature
        if tools:
            request["tools"] = [to_openai_tool(t) for t in tools]
            request["tool_choice"] = "auto"

        def send(cap: int, estimate: int) -> Sent:
            capped = {**request, self._limit_name: cap}
            response, attempts, seconds = self._with_retries(
                lambda: self._client.chat.completions.create(**capped), estimate, tools_sent=bool(tools)
            )
            with reading_reply(self.endpoint):
                return self._completion(response, messages, tools, seconds, attempts), response.usage is not None

        return self._fitted(messages, tools, max_tokens or self.config.max_output_tokens, send)

    def _completion(
        self, response: Any, messages: Sequence[Message], tools: Sequence[ToolSpec], seconds: float, attempts: int
    ) -> Completion:
        if not response.choices:
            raise LLMError(f"llm endpoint {self.endpoint} returned no choices for model {self.config.model}")
        choice = response.choices[0]
        text = choice.message.content or ""
        reasoning = _reasoning(choice.message)
        if not reasoning:
            reasoning, text = split_think(text)
        calls = tuple(from_openai_tool_call(c) for c in choice.message.tool_calls or () if getattr(c, "function", None))
        usage = response.usage
        if usage is not None:
            prompt_tokens, completion_tokens = usage.prompt_tokens or 0, usage.completion_tokens or 0
        else:  # some servers omit usage; an estimate keeps budgets meaningful
            prompt_tokens = estimate_prompt_tokens(messages, tools)
            completion_tokens = estimate_completion_tokens(text, calls, reasoning)
        return Completion(
            text=text,
            reasoning=reasoning,
            tool_calls=calls,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=self.config.cost_usd(prompt_tokens, completion_tokens),
            model=response.model or self.config.model,
            finish_reason=choice.finish_reason or "",
            seconds=seconds,
            attempts=attempts,
        )


def _reasoning(message: Any) -> str:
    """The reply's separate reasoning: fields the SDK does not model, read as its extras."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(message, name, None)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def to_openai_message(message: Message) -> dict[str, Any]:
    """One of our messages in chat-completions form."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content}
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.name:
        wire["name"] = message.name
    if message.tool_calls:
        wire["content"] = message.content or None
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _arguments_text(c)}}
            for c in message.tool_calls
        ]
    return wire


def to_openai_tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def from_openai_tool_call(call: Any) -> ToolCall:
    return ToolCall(id=call.id, name=call.function.name, arguments=parse_arguments(call.function.arguments))


def _arguments_text(call: ToolCall) -> str:
    # Malformed arguments go back as the model wrote them, so it can see what it got wrong.
    return call.arguments["_raw"] if call.malformed else json.dumps(call.arguments)
