"""The provider-neutral records of a chat: messages, tool specs, tool calls and completions.

Frozen pydantic models that round-trip through JSON and tolerate unknown fields. A reasoning
model's reasoning (``reasoning_content``, Anthropic thinking blocks, inline ``<think>``) is kept
in ``Completion.reasoning``, apart from ``text``: nothing is ever parsed out of it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# The same rule as kernelkiln.memory.tokens, restated so that llm/ does not import the memory package.
CHARS_PER_TOKEN = 4.0

Role = Literal["system", "user", "assistant", "tool"]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class ToolSpec(_Record):
    """A tool the model may call: its name, what it does, and its parameters as a JSON schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolCall(_Record):
    """One call the model asked for. Arguments that were not a JSON object are kept as ``{"_raw": text}``."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    @property
    def malformed(self) -> bool:
        """Whether the model's arguments could not be parsed (the caller should ask again)."""
        return set(self.arguments) == {"_raw"}


def parse_arguments(raw: str | dict[str, Any] | None) -> dict[str, Any]:
    """Tool-call arguments as a dict; text that is not a JSON object becomes ``{"_raw": text}``."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {"_raw": raw}
    return parsed if isinstance(parsed, dict) else {"_raw": raw}


class Message(_Record):
    """One chat message. An assistant message may carry tool calls; a ``tool`` message answers one."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # role "tool": the ToolCall.id this answers
    name: str | None = None  # role "tool": the tool's name (some endpoints want it)
    # assistant: Anthropic thinking blocks as received; the API wants them back before their tool calls
    thinking: tuple[dict[str, Any], ...] = ()


class Completion(_Record):
    """A model's reply with its accounting: tokens as the provider reported them, cost, time and tries."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    model: str = ""
    finish_reason: str = ""
    seconds: float = 0.0  # wall time of the call, retries and their waits included
    attempts: int = 1  # HTTP tries it took (1 when the first succeeded)
    reasoning: str = ""  # the model's separate reasoning; its tokens are in completion_tokens
    thinking: tuple[dict[str, Any], ...] = ()  # Anthropic's signed thinking blocks, verbatim
    window: int | None = None  # the context window this reply was cut at, learned from it (llm.fit); else None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_message(self) -> Message:
        """The assistant message to append to the conversation (its reasoning is not sent back)."""
        return Message(role="assistant", content=self.text, tool_calls=self.tool_calls, thinking=self.thinking)


def estimate_prompt_tokens(messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> int:
    """About one token per four characters of the messages and tool specs (for endpoints that report no usage)."""
    parts = [m.content + "".join(_call_text(c) for c in m.tool_calls) for m in messages]
    parts += [t.model_dump_json() for t in tools]
    return estimate_tokens("".join(parts))


def estimate_completion_tokens(text: str, tool_calls: Sequence[ToolCall] = (), reasoning: str = "") -> int:
    """About one token per four characters of a reply, its tool calls and its reasoning."""
    return estimate_tokens(reasoning + text + "".join(_call_text(c) for c in tool_calls))


def split_think(text: str) -> tuple[str, str]:
    """(reasoning, answer) of a reply that carries its reasoning inline as ``<think>…</think>``.

    Servers without a reasoning parser do so; some chat templates open the ``<think>`` in the
    prompt, so a reply may hold only the closing tag. Any other reply is all answer.
    """
    if "</think>" not in text or ("<think>" in text and not text.lstrip().startswith("<think>")):
        return "", text
    head, _, tail = text.partition("</think>")
    return head.strip().removeprefix("<think>").strip(), tail.lstrip()


def estimate_tokens(text: str) -> int:
    """About one token per four characters (at least 1)."""
    return max(1, round(len(text) / CHARS_PER_TOKEN))


def _call_text(call: ToolCall) -> str:
    return call.name + json.dumps(call.arguments)
