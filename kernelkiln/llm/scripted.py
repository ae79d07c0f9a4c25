"""A ``ChatClient`` that plays a script of replies instead of calling a model: the stand-in llm of
``kiln ablate``'s context study (no network), and the tests' double.

A reply is a ``Completion``; a ``str`` (plain text); a dict ``{"text", "tool_calls": [{"name",
"arguments", "id"?}], "reasoning", "prompt_tokens", "completion_tokens", "finish_reason", "model"}``
(all optional; tokens not given are estimated from the prompt and the reply); ``{"status": ...}``
(the endpoint failing for good: an LLMError, as a real client raises once retries are spent); or a
callable ``(messages, tools) -> reply``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from kernelkiln.llm.client import LLMError, ToolsRejected
from kernelkiln.llm.config import LLMConfig
from kernelkiln.llm.messages import (
    Completion,
    Message,
    ToolCall,
    ToolSpec,
    estimate_completion_tokens,
    estimate_prompt_tokens,
    parse_arguments,
)
from kernelkiln.llm.retry import status_failure

Reply = Completion | str | dict[str, Any] | Callable[[list[Message], list[ToolSpec]], "Reply"]


class ScriptExhausted(AssertionError):
    """A double was called more often than its script has replies."""


def to_completion(
    reply: Reply, messages: Sequence[Message], tools: Sequence[ToolSpec], *, model: str, ids: Iterator[int]
) -> Completion:
    """A script entry as the Completion it stands for (``ids`` numbers tool calls that have no id)."""
    while callable(reply):
        reply = reply(list(messages), list(tools))
    if isinstance(reply, Completion):
        return reply
    spec: dict[str, Any] = {"text": reply} if isinstance(reply, str) else dict(reply)
    calls = tuple(
        ToolCall(id=c.get("id") or f"call_{next(ids)}", name=c["name"], arguments=parse_arguments(c.get("arguments")))
        for c in spec.get("tool_calls", ())
    )
    text = spec.get("text", "")
    reasoning = spec.get("reasoning", "")
    prompt = spec.get("prompt_tokens")
    completion = spec.get("completion_tokens")
    return Completion(
        text=text,
        reasoning=reasoning,
        tool_calls=calls,
        prompt_tokens=estimate_prompt_tokens(messages, tools) if prompt is None else prompt,
        completion_tokens=estimate_completion_tokens(text, calls, reasoning) if completion is None else completion,
        model=spec.get("model", model),
        finish_reason=spec.get("finish_reason", "tool_calls" if calls else "stop"),
    )


class ScriptedClient:
    """A ``ChatClient`` that plays ``script`` and records every call in ``.calls`` as (messages, tools)."""

    def __init__(self, script: Iterable[Reply], *, config: LLMConfig | None = None) -> None:
        self.script = list(script)
        self.config = config
        self.calls: list[tuple[list[Message], list[ToolSpec]]] = []
        self._ids = itertools.count(1)

    @property
    def remaining(self) -> int:
        return len(self.script) - len(self.calls)

    def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), max_tokens: int | None = None
    ) -> Completion:
        """The next scripted reply; ScriptExhausted once the script has run out."""
        if not self.remaining:
            last = messages[-1].content[:200] if messages else ""
            raise ScriptExhausted(
                f"ScriptedClient got call {len(self.calls) + 1} but its script has {len(self.script)} replies; "
                f"the prompt ended with: {last!r}"
            )
        reply = self.script[len(self.calls)]
        self.calls.append((list(messages), list(tools)))
        if (
            isinstance(reply, dict) and "status" in reply
        ):  # the endpoint failing for good, as the real clients report it
            failure = status_failure(int(reply["status"]), detail=reply.get("message", ""))
            if tools and failure.rejects_tools():
                raise ToolsRejected(f"llm endpoint scripted rejected tool calls: {failure.what}", failure.what)
            raise LLMError(f"llm endpoint scripted failed: {failure.what}")
        model = self.config.model if self.config else "scripted"
        completion = to_completion(reply, messages, tools, model=model, ids=self._ids)
        if self.config and not completion.cost_usd:
            cost = self.config.cost_usd(completion.prompt_tokens, completion.completion_tokens)
            completion = completion.model_copy(update={"cost_usd": cost})
        return completion
