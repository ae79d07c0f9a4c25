"""The policy each agent runs, built from the run's configuration."""

from __future__ import annotations

from kernelkiln.agents.tuner import Tuner
from kernelkiln.llm.client import ChatClient
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.policy.turn import Policy


def make_policy(config: OptimizeConfig, agent: str, task_id: str, client: ChatClient | None = None) -> Policy:
    """A fresh policy for ``agent`` on ``task_id`` (``client``: the llm policy's model, default from ``config.llm``)."""
    if config.policy == "tuner":
        return Tuner(agent, rng_seed=f"{task_id}:{config.seed}")
    from kernelkiln.agents.llm import LLMPolicy  # the SDKs load only when asked for

    return LLMPolicy(config, agent, client=client)
