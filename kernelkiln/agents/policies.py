"""The policy each agent runs, built from the run's typed policy config."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kernelkiln.agents.config import LLMPolicyConfig, PolicyConfig, ReplayConfig, TunerConfig
from kernelkiln.agents.tuner import Tuner
from kernelkiln.context.config import ContextConfig
from kernelkiln.llm.client import ChatClient
from kernelkiln.llm.waiting import WaitListener
from kernelkiln.policy.turn import Policy

if TYPE_CHECKING:
    from kernelkiln.agents.protocol import ReplyProtocol


class RunPolicies:
    """Makes every agent's policy for one run, and holds what its llm agents share: the reply-protocol switch.

    ``client`` replaces the model endpoint (tests, benchmarks with a scripted model); a
    ``record`` directory wraps the model in a RecordingClient whose header keeps ``settings``
    (the run's configuration as JSON); the replay policy answers from its session (``client``
    is not used) with the recorded run's model settings. ``waits(task_id, agent)`` is the
    listener of that agent's model client for long waits (default: lines on stderr).
    """

    def __init__(
        self,
        policy: PolicyConfig,
        context: ContextConfig,
        client: ChatClient | None = None,
        settings: dict[str, Any] | None = None,
        waits: Callable[[str, str], WaitListener] | None = None,
    ) -> None:
        self.policy, self.context, self.client = policy, context, client
        self.settings = settings or {}
        self.waits = waits
        self._protocol: ReplyProtocol | None = None
        self._replayed: LLMPolicyConfig | None = None  # the replay as an llm config with the recording's model

    def make(self, agent: str, task_id: str) -> Policy:
        """A fresh policy for ``agent`` on ``task_id``."""
        match self.policy:
            case TunerConfig(search=search, seed=seed):
                return Tuner(agent, rng_seed=f"{task_id}:{seed}", search=search)
            case ReplayConfig() as config:
                from kernelkiln.agents.replay import ReplayPolicy
                from kernelkiln.llm.replay import ReplayClient

                replay = ReplayClient(config.session, task_id=task_id, agent=agent)
                if self._replayed is None:
                    fields = config.model_dump(exclude={"kind", "session"})
                    self._replayed = LLMPolicyConfig(**fields, llm=replay.llm)
                return ReplayPolicy(self._llm_policy(self._replayed, agent, task_id, replay), replay)
            case LLMPolicyConfig() as config:
                return self._llm_policy(config, agent, task_id, self.client)

    @property
    def protocol(self) -> ReplyProtocol:
        """The run's one reply-protocol switch (made with the first llm policy)."""
        if self._protocol is None:
            from kernelkiln.agents.protocol import ReplyProtocol

            llm = self._replayed or self.policy
            assert isinstance(llm, LLMPolicyConfig), "only a model's policies have a reply protocol"
            self._protocol = ReplyProtocol(llm.llm.reply_protocol)
        return self._protocol

    def _llm_policy(self, config: LLMPolicyConfig, agent: str, task_id: str, client: ChatClient | None) -> Policy:
        from kernelkiln.agents.llm import LLMPolicy  # the SDKs load only when asked for
        from kernelkiln.llm import make_client

        if client is None:
            client = make_client(config.llm, waits=self.waits(task_id, agent) if self.waits else None)
        if config.record:
            client = self._recording(config, config.record, agent, task_id, client)
        return LLMPolicy(config, self.context, agent, client=client, protocol=self.protocol)

    def _recording(
        self, config: LLMPolicyConfig, record: str, agent: str, task_id: str, client: ChatClient
    ) -> ChatClient:
        from kernelkiln.llm.record import RecordingClient
        from kernelkiln.llm.session import SessionHeader

        header = SessionHeader(llm=config.llm, config=self.settings)
        key = os.environ.get(config.llm.key_env, "")
        return RecordingClient(client, record, task_id=task_id, agent=agent, header=header, secrets=[key])
