"""Thin chat clients over the official openai and anthropic SDKs (imported only when a client is made).

``client`` holds the interface and what every client shares; the factory lives here, above
the SDK clients it chooses between, so no client module imports another's package.
"""

from typing import Any

from kernelkiln.llm.anthropic_client import AnthropicClient
from kernelkiln.llm.client import ChatClient, LLMError, ToolsRejected, resolve_api_key
from kernelkiln.llm.config import LLMConfig
from kernelkiln.llm.messages import Completion, Message, ToolCall, ToolSpec
from kernelkiln.llm.openai_client import OpenAIClient
from kernelkiln.llm.overflow import ContextExceeded


def make_client(config: LLMConfig, **options: Any) -> ChatClient:
    """The client for ``config.provider``; ``options`` (e.g. ``sleep``) go to its constructor."""
    if config.provider == "anthropic":
        _require("anthropic")
        return AnthropicClient(config, **options)
    _require("openai")
    return OpenAIClient(config, **options)


def _require(package: str) -> None:
    try:
        __import__(package)
    except ImportError:
        raise LLMError(f"the llm policy needs the {package} package: pip install 'kernelkiln[llm]'") from None


__all__ = [
    "AnthropicClient",
    "ChatClient",
    "Completion",
    "ContextExceeded",
    "LLMConfig",
    "LLMError",
    "Message",
    "OpenAIClient",
    "ToolCall",
    "ToolSpec",
    "ToolsRejected",
    "make_client",
    "resolve_api_key",
]
