"""Budgeted, layered prompt assembly (KOPE): hot, recent, warm and cold layers under B_k."""

from kernelkiln.context.budget import knowledge_budget
from kernelkiln.context.builder import ContextBuilder
from kernelkiln.context.config import ContextConfig
from kernelkiln.context.estimator import TokenEstimator
from kernelkiln.context.prompt import Prompt, Section

__all__ = ["ContextBuilder", "ContextConfig", "Prompt", "Section", "TokenEstimator", "knowledge_budget"]
