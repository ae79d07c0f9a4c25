"""The policy each agent runs, built from the run's configuration."""

from __future__ import annotations

import os
import threading
import weakref
from typing import TYPE_CHECKING

from kernelkiln.agents.tuner import Tuner
from kernelkiln.llm.client import ChatClient
from kernelkiln.llm.config import LLMConfig
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.policy.turn import Policy

if TYPE_CHECKING:
    from kernelkiln.agents.protocol import ReplyProtocol

# One reply-protocol switch per run: a run hands every make_policy call the same config object.
_PROTOCOLS: dict[int, ReplyProtocol] = {}
_PROTOCOLS_LOCK = threading.Lock()
_REPLAYED: dict[int, OptimizeConfig] = {}  # a replay run's config with the recorded llm settings


def make_policy(config: OptimizeConfig, agent: str, task_id: str, client: ChatClient | None = None) -> Policy:
    """A fresh policy for ``agent`` on ``task_id`` (``client``: the llm policy's model, default from ``config.llm``).

    ``config.record`` wraps the model in a RecordingClient; the replay policy answers from
    ``config.replay`` (``client`` is not used) with the recorded run's model settings.
    """
    if config.policy == "tuner":
        return Tuner(agent, rng_seed=f"{task_id}:{config.seed}")
    if config.policy == "replay":
        from kernelkiln.agents.replay import ReplayPolicy
        from kernelkiln.llm.replay import ReplayClient

        replay = ReplayClient(config.replay, task_id=task_id, agent=agent)
        return ReplayPolicy(_llm_policy(_replayed(config, replay.llm), agent, task_id, replay), replay)
    return _llm_policy(config, agent, task_id, client)


def _replayed(config: OptimizeConfig, llm: LLMConfig) -> OptimizeConfig:
    """``config`` with the recording's model settings: one object per run, so its agents share one switch."""
    with _PROTOCOLS_LOCK:
        key = id(config)
        if key not in _REPLAYED:
            _REPLAYED[key] = config.model_copy(update={"llm": llm})
            weakref.finalize(config, _REPLAYED.pop, key, None)
        return _REPLAYED[key]


def _llm_policy(config: OptimizeConfig, agent: str, task_id: str, client: ChatClient | None) -> Policy:
    from kernelkiln.agents.llm import LLMPolicy  # the SDKs load only when asked for

    if config.record:
        client = _recording(config, agent, task_id, client)
    return LLMPolicy(config, agent, client=client, protocol=run_protocol(config))


def run_protocol(config: OptimizeConfig) -> ReplyProtocol:
    """The reply-protocol switch shared by every llm policy made for ``config`` (that is, for one run)."""
    from kernelkiln.agents.protocol import ReplyProtocol

    with _PROTOCOLS_LOCK:
        key = id(config)
        if key not in _PROTOCOLS:
            _PROTOCOLS[key] = ReplyProtocol(config.llm.reply_protocol)
            weakref.finalize(config, _PROTOCOLS.pop, key, None)  # gone with the run, before its id can recur
        return _PROTOCOLS[key]


def _recording(config: OptimizeConfig, agent: str, task_id: str, client: ChatClient | None) -> ChatClient:
    from kernelkiln.llm import make_client
    from kernelkiln.llm.record import RecordingClient
    from kernelkiln.llm.session import SessionHeader

    header = SessionHeader(llm=config.llm, config=config.model_dump(mode="json"))
    key = os.environ.get(config.llm.key_env, "")
    return RecordingClient(client or make_client(config.llm), config.record, task_id=task_id, agent=agent,
                           header=header, secrets=[key])
