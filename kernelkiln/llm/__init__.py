"""Thin chat clients over the official openai and anthropic SDKs (imported only when a client is made)."""

from kernelkiln.llm.anthropic_client import AnthropicClient
from kernelkiln.llm.client import ChatClient, LLMError, make_client, resolve_api_key
from kernelkiln.llm.config import LLMConfig
from kernelkiln.llm.messages import Completion, Message, ToolCall, ToolSpec
from kernelkiln.llm.openai_client import OpenAIClient

__all__ = [
    "AnthropicClient",
    "ChatClient",
    "Completion",
    "LLMConfig",
    "LLMError",
    "Message",
    "OpenAIClient",
    "ToolCall",
    "ToolSpec",
    "make_client",
    "resolve_api_key",
]
