"""The chat-client interface, its one error type, and the factory that picks an SDK."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

from kernelkiln.errors import UserError
from kernelkiln.llm.config import LLMConfig
from kernelkiln.llm.config import is_local as is_local  # re-exported: callers ask the client module
from kernelkiln.llm.messages import Completion, Message, ToolSpec

# vLLM, SGLang and Ollama accept any key unless started with one; the SDKs insist on a non-empty one.
LOCAL_DUMMY_KEY = "EMPTY"


class LLMError(UserError):
    """An LLM endpoint could not be used (unreachable, refused, misconfigured). ``str`` is one line, keyless."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class ToolsRejected(LLMError):
    """The endpoint refused the request's ``tools`` (HTTP 400/422 naming tools): it takes text replies only.

    ``detail`` is the server's reason on one line, e.g. "400 Bad Request: ... does not support tools".
    """

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


@contextmanager
def reading_reply(endpoint: str) -> Iterator[None]:
    """Turns a reply that lacks the API's shape (a missing field, a wrong type) into a one-line LLMError."""
    try:
        yield
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
        detail = " ".join(str(exc).split())[:200]
        raise LLMError(
            f"llm endpoint {endpoint} sent a reply that is not the API's ({type(exc).__name__}: {detail})"
        ) from None


@runtime_checkable
class ChatClient(Protocol):
    """Anything that turns a conversation (and the tools on offer) into one completion."""

    def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), max_tokens: int | None = None
    ) -> Completion:
        """The model's next reply; raises LLMError when the endpoint fails for good."""
        ...


def resolve_api_key(config: LLMConfig, environ: Mapping[str, str] | None = None) -> str:
    """The API key from ``config.key_env``; a dummy one for a local endpoint; else LLMError naming the variable."""
    env = os.environ if environ is None else environ
    key = env.get(config.key_env, "").strip()
    if key:
        return key
    if is_local(config.base_url):
        return LOCAL_DUMMY_KEY
    where = config.base_url or f"the {config.provider} API"
    raise LLMError(f"no API key for {where}: set the environment variable {config.key_env}")
