"""The replay policy: an agent whose recording has ended stops; a resumed replay skips what it used."""

from __future__ import annotations

from types import SimpleNamespace

from kernelkiln.agents.replay import ReplayPolicy
from kernelkiln.llm.config import LLMConfig
from kernelkiln.llm.messages import Message
from kernelkiln.llm.record import RecordingClient
from kernelkiln.llm.replay import ReplayClient
from kernelkiln.llm.session import SessionHeader
from kernelkiln.testing.llm import ScriptedClient

PROMPT = [Message(role="system", content="s"), Message(role="user", content="## Task: t")]


class Asks:
    """A stand-in inner policy: each turn is one call to its client."""

    def __init__(self, client):
        self.client, self.observed = client, []

    def propose(self, turn):
        return self.client.complete(PROMPT).text

    def observe(self, attempt):
        self.observed.append(attempt)


def replaying(tmp_path, replies) -> ReplayClient:
    header = SessionHeader(llm=LLMConfig(model="m"))
    recorder = RecordingClient(ScriptedClient(replies), tmp_path, task_id="t", agent="a1", header=header)
    for _ in replies:
        recorder.complete(PROMPT)
    return ReplayClient(tmp_path, task_id="t", agent="a1")


def test_the_agent_stops_when_its_recording_ends(tmp_path):
    client = replaying(tmp_path, ["one"])
    policy = ReplayPolicy(Asks(client), client)
    assert [policy.propose(None), policy.propose(None)] == ["one", None]


def test_a_resumed_replay_skips_the_exchanges_its_stored_attempts_used(tmp_path):
    client = replaying(tmp_path, ["one", "two", "three"])
    policy = ReplayPolicy(Asks(client), client)
    for calls in ([], [(10, 2)], [(10, 2)]):  # the seed (no call), then two model turns, as a resume replays them
        policy.observe(SimpleNamespace(case=SimpleNamespace(calls=calls)))
    assert policy.propose(None) == "three" and len(policy.inner.observed) == 3
    policy.observe(SimpleNamespace(case=SimpleNamespace(calls=[(10, 2)])))  # a live turn: already played
    assert client.remaining == 0
