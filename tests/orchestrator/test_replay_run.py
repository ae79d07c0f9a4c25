"""Record a scripted llm run, then replay it offline through the optimizer: same replies, per agent, in order."""

from __future__ import annotations

import json
import re

import pytest

from kernelkiln.agents.config import ReplayConfig
from kernelkiln.errors import UserError
from kernelkiln.llm.session import read_stream
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.results import RunResult
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.store import open_store
from kernelkiln.testing.sessions.make import TINY, run_scripted, session_config
from kernelkiln.testing.tasks import tiny_suite


def by_agent(result: RunResult, tmp_path, name: str) -> dict[str, list[str]]:
    """The llm attempts' summaries of each agent, in order, from the run's store."""
    store = open_store(f"sqlite:///{tmp_path / name / 'kiln.db'}")
    try:
        with store.read() as conn:
            attempts = store.attempts.for_run(conn, result.run_id)
    finally:
        store.close()
    out: dict[str, list[str]] = {}
    for a in attempts:
        if a.case.move == "llm":
            out.setdefault(a.agent, []).append(a.summary)
    return out


def test_a_replay_runs_the_recorded_replies_again_with_no_endpoint(tmp_path):
    session = tmp_path / "session"
    recorded = run_scripted(session_config(session, budget=3), tmp_path / "record")
    exchanges = read_stream(session, "tiny_softmax", "a1")
    assert len(exchanges) == 2 and all(e.reply == "tool" for e in exchanges)

    replayed = run_scripted(session_config(replay=session, budget=3), tmp_path / "replay")
    assert (
        by_agent(replayed, tmp_path, "replay")
        == by_agent(recorded, tmp_path, "record")
        == {"a1": [e.response.tool_calls[0].arguments["summary"] for e in exchanges]}
    )
    old, new = recorded.tasks["tiny_softmax"], replayed.tasks["tiny_softmax"]
    assert new.attempts == old.attempts == 3
    assert (new.prompt_tokens, new.completion_tokens) == (old.prompt_tokens, old.completion_tokens)


def test_a_replay_takes_its_model_settings_from_the_recording():
    config = session_config(replay="anywhere")
    assert isinstance(config.policy, ReplayConfig) and "llm" not in ReplayConfig.model_fields  # no endpoint needed
    with pytest.raises(ValueError, match="needs a recorded session"):
        OptimizeConfig(policy={"kind": "replay"})
    # Configurations of earlier versions, flat, are refused in the words they were.
    with pytest.raises(ValueError, match="add --policy replay"):
        OptimizeConfig.stored({"policy": "llm", "llm": {"model": "m"}, "replay": "x"})
    with pytest.raises(ValueError, match="the tuner calls no model"):
        OptimizeConfig.stored({"record": "x"})


def test_a_replay_of_a_changed_task_stops_at_the_first_exchange(tmp_path):
    session = tmp_path / "session"
    run_scripted(session_config(session, budget=2), tmp_path / "record")
    with tiny_suite(("tiny_softmax",)) as suite, pytest.raises(UserError) as diverged:  # its KILN gains FLOPs
        run_scripted(session_config(replay=session, budget=2), tmp_path / "replay", task=suite / "tiny_softmax.py")
    line = str(diverged.value)
    assert "diverged at exchange 1 of a1 on tiny_softmax: message 1 (user) differs: recorded '" in line
    with pytest.raises(UserError, match=r"recorded no task tiny_softmax\[dim=32\] \(it holds: tiny_softmax\)"):
        run_scripted(session_config(replay=session, budget=2), tmp_path / "other", overrides={"dim": 32})


def test_a_replay_with_other_prompt_shaping_settings_is_refused_before_anything_runs(tmp_path):
    session = tmp_path / "session"
    run_scripted(session_config(session, budget=2), tmp_path / "record")
    replay = session_config(replay=session, budget=2)
    scratch = replay.model_copy(update={"policy": replay.policy.model_copy(update={"start_from_candidate": False})})
    cases = [
        (scratch, "recorded with starting candidate the task's own, this run has none (--from-scratch)"),
        (session_config(replay=session, budget=2, agents=2), "recorded with agents (one lens each) 1, this run has 2"),
        (
            session_config(replay=session, budget=2, context={"max_experiences": 0}),
            "recorded with context.max_experiences 5, this run has 0",
        ),
    ]
    for config, message in cases:
        with pytest.raises(UserError, match=re.escape(f"--replay {session} was {message}: its prompts would differ")):
            run_scripted(config, tmp_path / "replay")
    store = open_store(f"sqlite:///{tmp_path / 'replay' / 'kiln.db'}")
    try:
        with store.read() as conn:
            assert store.attempts.count(conn) == 0  # refused before the seed was evaluated
    finally:
        store.close()


def test_a_replay_whose_prompt_changed_stops_naming_the_message(tmp_path):
    session = tmp_path / "session"
    run_scripted(session_config(session, budget=2), tmp_path / "record")
    stream = session / "tiny_softmax" / "a1.jsonl"
    line = json.loads(stream.read_text())
    messages = line["request"]["messages"]
    messages[0]["content"] = messages[0]["content"].replace("performance engineer", "poet")
    stream.write_text(json.dumps(line) + "\n")
    with pytest.raises(
        UserError,
        match=r"exchange 1 of a1 on tiny_softmax: message 0 \(system\) differs: "
        r"recorded '.*poet",
    ):
        run_scripted(session_config(replay=session, budget=2), tmp_path / "replay")


def test_a_multi_agent_replay_gives_each_agent_its_own_replies_in_order(tmp_path):
    # The experiences one agent's KEEPs leave reach the other at a moment that depends on the
    # interleaving, and a recorded reply has adoption records only for those it was shown (one
    # shown too in the replay is a re-ask, a divergence): this run shows none, as README advises.
    shown = {"context": {"max_experiences": 0}}
    session = tmp_path / "session"
    recorded = by_agent(
        run_scripted(session_config(session, agents=2, budget=5, **shown), tmp_path / "record"), tmp_path, "record"
    )
    streams = {
        agent: [e.response.tool_calls[0].arguments["summary"] for e in read_stream(session, "tiny_softmax", agent)]
        for agent in ("a1", "a2")
    }
    assert recorded == {agent: s for agent, s in streams.items() if s}
    for again in ("replay1", "replay2"):
        result = run_scripted(session_config(replay=session, agents=2, budget=5, **shown), tmp_path / again)
        replayed = by_agent(result, tmp_path, again)
        # Each agent gets its own recorded replies, in order, whichever agent's thread runs first.
        assert all(replies == streams[agent][: len(replies)] for agent, replies in replayed.items()), again
        # An agent whose recording has ended stops and hands its evaluation back; the runner can lose
        # that one slot when the other agent looked for work at that very moment (task_run's take()).
        assert sum(map(len, replayed.values())) >= sum(map(len, streams.values())) - 1, again


def test_a_replayed_run_can_be_recorded_again(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    run_scripted(session_config(first, budget=2), tmp_path / "record")
    run_scripted(session_config(second, replay=first, budget=2), tmp_path / "replay")
    old, new = read_stream(first, "tiny_softmax", "a1"), read_stream(second, "tiny_softmax", "a1")
    assert [e.response for e in new] == [e.response for e in old]


def test_the_optimizers_client_override_is_recorded(tmp_path, sqlite_store):
    from kernelkiln.testing.llm import ScriptedClient
    from kernelkiln.testing.sessions.make import submits

    client = ScriptedClient([submits()])
    config = session_config(tmp_path / "session", budget=2)
    Optimizer(Memory(sqlite_store), tmp_path, client=client).start([TaskSpec(str(TINY), {})], config, tmp_path / "o")
    assert client.remaining == 0 and len(read_stream(tmp_path / "session", "tiny_softmax", "a1")) == 1
