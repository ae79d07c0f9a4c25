"""Memory: experience graph, adoption-traced values, resident rules, shared board, knowledge."""

from kernelkiln.memory.callbacks import AttemptResult, MemoryCallbacks, VerdictCallback
from kernelkiln.memory.config import MemoryConfig
from kernelkiln.memory.memory import Memory

__all__ = ["AttemptResult", "Memory", "MemoryCallbacks", "MemoryConfig", "VerdictCallback"]
