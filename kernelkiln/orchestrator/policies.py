"""The policy each agent runs, built from the run's configuration."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kernelkiln.agents.tuner import Tuner
from kernelkiln.llm.client import ChatClient
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.policy.turn import Policy

if TYPE_CHECKING:
    from kernelkiln.agents.protocol import ReplyProtocol


class RunPolicies:
    """Makes every agent's policy for one run, and holds what its llm agents share: the reply-protocol switch.

    ``client`` replaces the model endpoint (tests, benchmarks with a scripted model);
    ``config.record`` wraps the model in a RecordingClient; the replay policy answers from
    ``config.replay`` (``client`` is not used) with the recorded run's model settings.
    """

    def __init__(self, config: OptimizeConfig, client: ChatClient | None = None) -> None:
        self.config, self.client = config, client
        self._protocol: ReplyProtocol | None = None
        self._replayed: OptimizeConfig | None = None  # the config with the recording's model settings

    def make(self, agent: str, task_id: str) -> Policy:
        """A fresh policy for ``agent`` on ``task_id``."""
        config = self.config
        if config.policy == "tuner":
            return Tuner(agent, rng_seed=f"{task_id}:{config.seed}", search=config.search)
        if config.policy == "replay":
            from kernelkiln.agents.replay import ReplayPolicy
            from kernelkiln.llm.replay import ReplayClient

            replay = ReplayClient(config.replay, task_id=task_id, agent=agent)
            if self._replayed is None:
                self._replayed = config.model_copy(update={"llm": replay.llm})
            return ReplayPolicy(self._llm_policy(self._replayed, agent, task_id, replay), replay)
        return self._llm_policy(config, agent, task_id, self.client)

    @property
    def protocol(self) -> ReplyProtocol:
        """The run's one reply-protocol switch (made with the first llm policy)."""
        if self._protocol is None:
            from kernelkiln.agents.protocol import ReplyProtocol

            llm = (self._replayed or self.config).llm
            self._protocol = ReplyProtocol(llm.reply_protocol)
        return self._protocol

    def _llm_policy(self, config: OptimizeConfig, agent: str, task_id: str, client: ChatClient | None) -> Policy:
        from kernelkiln.agents.llm import LLMPolicy  # the SDKs load only when asked for

        if config.record:
            client = _recording(config, agent, task_id, client)
        return LLMPolicy(config, agent, client=client, protocol=self.protocol)


def _recording(config: OptimizeConfig, agent: str, task_id: str, client: ChatClient | None) -> ChatClient:
    from kernelkiln.llm import make_client
    from kernelkiln.llm.record import RecordingClient
    from kernelkiln.llm.session import SessionHeader

    header = SessionHeader(llm=config.llm, config=config.model_dump(mode="json"))
    key = os.environ.get(config.llm.key_env, "")
    return RecordingClient(
        client or make_client(config.llm), config.record, task_id=task_id, agent=agent, header=header, secrets=[key]
    )
