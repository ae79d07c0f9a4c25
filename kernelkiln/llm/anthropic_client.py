"""A chat client for the Anthropic messages API.

Extended thinking: ``thinking`` blocks become ``Completion.reasoning`` (never parsed), and the
blocks themselves (``thinking`` with its signature, ``redacted_thinking``) travel back before the
tool calls they preceded, which the API requires when thinking is on and tools are used.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from kernelkiln.llm.client import reading_reply
from kernelkiln.llm.config import LLMConfig
from kernelkiln.llm.messages import Completion, Message, ToolCall, ToolSpec, parse_arguments
from kernelkiln.llm.sdk_client import SDKClient, Sent
from kernelkiln.llm.waiting import FIRST_NOTICE_S, WaitListener

# Anthropic's stop reasons in the chat-completions vocabulary every Completion uses.
FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


class AnthropicClient(SDKClient):
    """``ChatClient`` over the official ``anthropic`` SDK, with kernelkiln's retry loop instead of the SDK's."""

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
        import anthropic

        super().__init__(config, anthropic, anthropic.Anthropic, sleep=sleep, rng=rng, waits=waits, notice_s=notice_s)

    def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), max_tokens: int | None = None
    ) -> Completion:
        """The model's next reply, its cap fitted to the window; LLMError when the endpoint fails for good."""
        system, wire = to_anthropic_messages(messages)
        request: dict[str, Any] = {"model": self.config.model, "messages": wire}
        if system:
            request["system"] = system
        if self.config.temperature is not None:
            request["temperature"] = self.config.temperature
        if tools:
            request["tools"] = [to_anthropic_tool(t) for t in tools]

        def send(cap: int, estimate: int) -> Sent:
            capped = {**request, "max_tokens": cap}
            response, attempts, seconds = self._with_retries(
                lambda: self._client.messages.create(**capped), estimate, tools_sent=bool(tools)
            )
            with reading_reply(self.endpoint):
                return self._completion(response, seconds, attempts), True

        return self._fitted(messages, tools, max_tokens or self.config.max_output_tokens, send)

    def _completion(self, response: Any, seconds: float, attempts: int) -> Completion:
        text = "".join(block.text for block in response.content if block.type == "text")
        thinking = tuple(
            _thinking_block(block) for block in response.content if block.type in ("thinking", "redacted_thinking")
        )
        reasoning = "\n\n".join(b["thinking"] for b in thinking if b.get("thinking"))
        calls = tuple(
            ToolCall(id=block.id, name=block.name, arguments=parse_arguments(block.input))
            for block in response.content
            if block.type == "tool_use"
        )
        usage = response.usage
        # Cached prompt tokens are reported apart from input_tokens; the prompt's size is their sum.
        prompt_tokens = (
            usage.input_tokens
            + (getattr(usage, "cache_creation_input_tokens", None) or 0)
            + (getattr(usage, "cache_read_input_tokens", None) or 0)
        )
        completion_tokens = usage.output_tokens
        stop = response.stop_reason or ""
        return Completion(
            text=text,
            reasoning=reasoning,
            thinking=thinking,
            tool_calls=calls,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=self.config.cost_usd(prompt_tokens, completion_tokens),
            model=response.model or self.config.model,
            finish_reason=FINISH_REASONS.get(stop, stop),
            seconds=seconds,
            attempts=attempts,
        )


def to_anthropic_messages(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """The system prompt and the turns in messages-API form.

    Tool results travel as ``tool_result`` blocks of a user turn, and consecutive turns of one
    role are merged, because the API wants user and assistant turns to alternate.
    """
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return system, turns


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [{"type": "tool_result", "tool_use_id": message.tool_call_id or "", "content": message.content}]
    blocks: list[dict[str, Any]] = [dict(b) for b in message.thinking] if message.tool_calls else []
    if message.content or not message.tool_calls:  # the API rejects empty text blocks beside tool calls
        blocks.append({"type": "text", "text": message.content})
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in message.tool_calls]
    return blocks


def _thinking_block(block: Any) -> dict[str, Any]:
    """A thinking block as the API wants it sent back (every field, the signature included)."""
    fields = ("thinking", "signature") if block.type == "thinking" else ("data",)
    return {"type": block.type, **{f: getattr(block, f, "") or "" for f in fields}}


def to_anthropic_tool(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
