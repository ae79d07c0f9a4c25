"""A server's refusal of a request too long for its context window, read for the window it names.

Servers that do not report their window at a model-info route still name it when they refuse
an oversized request (HTTP 400, TGI 422, a proxy's 413), each in its own words:

- vLLM, llama-cpp-python, OpenAI: "This model's maximum context length is 8192 tokens. However,
  you requested 8539 tokens (4443 in the messages, 4096 in the completion)" (or "your messages
  resulted in N tokens", "your request has N input tokens");
- SGLang: "... the model's maximum context length of 8192 tokens ... 4443 tokens from the input";
- llama.cpp's ``llama-server``: "request (4476 tokens) exceeds the available context size (4096
  tokens)", or, older, "the request exceeds the available context size" with ``n_ctx`` and
  ``n_prompt_tokens`` beside the message;
- LM Studio: "... keep the first 5000 tokens ... loaded with context length of only 4096 tokens";
- TGI: "`inputs` tokens + `max_new_tokens` must be <= 8192. Given: 8000 `inputs` tokens ...";
- Anthropic: "prompt is too long: 210000 tokens > 200000 maximum", "... exceed context limit:
  198000 + 4096 > 200000".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from kernelkiln.llm.client import LLMError

REFUSAL_STATUSES = frozenset({400, 413, 422})

# (window, prompt) patterns; a window pattern names the limit, a prompt pattern the request's prompt tokens.
_WINDOW = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"maximum context length (?:is|of) (\d+) tokens",
        r"available context size \((\d+) tokens\)",
        r"context length of only (\d+) tokens",
        r"model's context length \((\d+) tokens\)",
        r"`max_new_tokens` must be <= (\d+)",
        r"\d+ \+ \d+ > (\d+)",
        r"\d+ tokens > (\d+) maximum",
        r"exceed context window of (\d+)",
    )
)
_PROMPT = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\((\d+) in the messages",
        r"your messages resulted in (\d+) tokens",
        r"your request has (\d+) input tokens",
        r"(\d+) tokens from the input",
        r"request \((\d+) tokens\) exceeds",
        r"keep the first (\d+) tokens",
        r"Given: (\d+) `inputs` tokens",
        r"(\d+) \+ \d+ > \d+",
        r"too long: (\d+) tokens >",
        r"the input \((\d+) tokens\)",
        r"Requested tokens \((\d+)\)",
    )
)
# What ContextExceeded's own message says: a replayed one is made again from its message alone.
_OWN = re.compile(r"context window of (\d+) tokens")
_OWN_PROMPT = re.compile(r"the prompt (?:has|needs about) (\d+) tokens")


@dataclass(frozen=True)
class Overflow:
    """What a refusal said: the window, the request's prompt tokens when it gave them, and its message."""

    window: int
    prompt_tokens: int | None
    message: str


def read_refusal(status: int, body: object) -> Overflow | None:
    """The window a refusal (status, the error body the SDK parsed) names, or None when it is no such refusal."""
    if status not in REFUSAL_STATUSES:
        return None
    fields = _fields(body)
    message = fields.get("message")
    text = message if isinstance(message, str) else json.dumps(body) if isinstance(body, Mapping) else str(body)
    window = _first(_WINDOW, text) or _count(fields.get("n_ctx"))
    if window is None:
        return None
    return Overflow(window, _first(_PROMPT, text) or _count(fields.get("n_prompt_tokens")), " ".join(text.split()))


class ContextExceeded(LLMError):
    """A request that does not fit the model's context window: ``window`` is the limit, ``prompt_tokens``
    the prompt's size when known. Made from its message alone (a replay does so), it reads both back."""

    def __init__(self, message: str, window: int | None = None, prompt_tokens: int | None = None) -> None:
        super().__init__(message)
        window = window if window is not None else _first((_OWN,), message)
        if window is None:
            raise TypeError("ContextExceeded needs the window: its message names none")
        self.window = window
        self.prompt_tokens = prompt_tokens if prompt_tokens is not None else _first((_OWN_PROMPT,), message)


def _fields(body: object) -> dict[str, object]:
    """The error's fields: the body's own, then those under its ``error`` (the SDKs pass either)."""
    if not isinstance(body, Mapping):
        return {}
    inner = body.get("error")
    return {**(dict(inner) if isinstance(inner, Mapping) else {}), **{str(k): v for k, v in body.items()}}


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        if (match := pattern.search(text)) and int(match.group(1)) > 0:
            return int(match.group(1))
    return None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
