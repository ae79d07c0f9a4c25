"""The guard: the trusted evaluator that never trusts the candidate."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelkiln.guard.config import GuardConfig
    from kernelkiln.guard.session import GuardSession
    from kernelkiln.guard.verdict import Verdict, WorkloadResult

__all__ = ["GuardConfig", "GuardSession", "Verdict", "WorkloadResult"]

_WHERE = {"GuardConfig": "config", "GuardSession": "session", "Verdict": "verdict", "WorkloadResult": "verdict"}


def __getattr__(name: str) -> Any:
    # Lazy, so importing kernelkiln.guard.config (a CLI option's type) does not load torch.
    if name in _WHERE:
        return getattr(importlib.import_module(f"kernelkiln.guard.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
