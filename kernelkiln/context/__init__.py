"""Budgeted, layered prompt assembly (KOPE): hot, recent, warm and cold layers under B_k (docs/architecture.md)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelkiln.context.budget import knowledge_budget
    from kernelkiln.context.builder import ContextBuilder
    from kernelkiln.context.config import ContextConfig
    from kernelkiln.context.estimator import TokenEstimator
    from kernelkiln.context.prompt import Prompt, Section

__all__ = ["ContextBuilder", "ContextConfig", "Prompt", "Section", "TokenEstimator", "knowledge_budget"]

_WHERE = {
    "ContextBuilder": "builder",
    "ContextConfig": "config",
    "Prompt": "prompt",
    "Section": "prompt",
    "TokenEstimator": "estimator",
    "knowledge_budget": "budget",
}


def __getattr__(name: str) -> Any:
    # Lazy, so the configuration tree can name ContextConfig without loading the builder (and torch).
    if name in _WHERE:
        return getattr(importlib.import_module(f"kernelkiln.context.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
