"""The guard: the trusted evaluator that never trusts the candidate."""

from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.session import GuardSession
from kernelkiln.guard.verdict import Verdict, WorkloadResult

__all__ = ["GuardConfig", "GuardSession", "Verdict", "WorkloadResult"]
