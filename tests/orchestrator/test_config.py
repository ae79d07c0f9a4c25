"""The run's configuration: the policy's typed config, and runs stored by earlier versions loading into it."""

from __future__ import annotations

import pytest

from kernelkiln.agents.config import LLMPolicyConfig, ReplayConfig, TunerConfig
from kernelkiln.orchestrator.config import OptimizeConfig

# run.config as a run stored it before each policy had a config of its own: every key flat.
OLD_STORED = {
    "policy": "llm",
    "agents": 2,
    "budget": 12,
    "max_tokens": None,
    "max_wall_s": None,
    "r_draft": 5,
    "platform": "cpu",
    "seed_file": None,
    "start_from_seed": False,
    "seed": 0,
    "search": "tpe",
    "tool_calls": 3,
    "reasks": 1,
    "confirm_time_budget_s": 20.0,
    "guard": {"time_budget_s": 8.0, "isolation": "strict", "platform": "cpu"},
    "context": {"mode": "active"},
    "llm": {"provider": "openai", "model": "qwen", "base_url": "http://127.0.0.1:9/v1", "context_window": 4096},
    "record": "sessions/a",
    "replay": None,
    "cluster": {"address": "local", "cpus_per_device": None, "device": None},
}


def test_a_run_stored_with_flat_policy_keys_loads_into_the_policys_config():
    config = OptimizeConfig.stored(OLD_STORED)
    assert config.policy == LLMPolicyConfig(
        llm={"model": "qwen", "base_url": "http://127.0.0.1:9/v1", "context_window": 4096},
        tool_calls=3,
        reasks=1,
        record="sessions/a",
        start_from_candidate=False,
    )
    assert (config.agents, config.budget, config.guard.isolation) == (2, 12, "strict")


def test_stored_tuner_and_replay_runs_keep_their_own_fields_and_drop_the_others():
    tuner = {**OLD_STORED, "policy": "tuner", "search": "random", "seed": 7, "record": None, "start_from_seed": True}
    assert OptimizeConfig.stored(tuner).policy == TunerConfig(search="random", seed=7)
    replay = {**OLD_STORED, "policy": "replay", "replay": "sessions/a", "record": None, "llm": None}
    assert OptimizeConfig.stored(replay).policy == ReplayConfig(
        session="sessions/a", tool_calls=3, reasks=1, start_from_candidate=False
    )


def test_a_config_stored_by_this_version_loads_as_it_was_written():
    config = OptimizeConfig(policy={"kind": "llm", "llm": {"model": "m"}, "reasks": 4}, budget=3)
    assert OptimizeConfig.stored(config.model_dump(mode="json")) == config


def test_the_tuner_runs_best_effort_unless_the_guard_sets_its_isolation():
    assert OptimizeConfig().guard.isolation == "best-effort"
    assert OptimizeConfig(guard={"isolation": "strict"}).guard.isolation == "strict"
    assert OptimizeConfig(policy={"kind": "llm", "llm": {"model": "m"}}).guard.isolation == "strict"


def test_a_policy_field_outside_its_policy_cannot_be_set():
    with pytest.raises(ValueError, match="Extra inputs"):
        OptimizeConfig(policy={"kind": "tuner", "reasks": 3})
    with pytest.raises(ValueError, match="Extra inputs"):
        OptimizeConfig(search="tpe")  # the flat key of earlier versions is a stored run's or a file's only


def test_the_earlier_names_of_the_starting_candidate_s_fields_still_set_them():
    from kernelkiln.memory.config import TransferConfig

    assert OptimizeConfig(seed_file="mine.py").start_file == "mine.py"
    llm = {"kind": "llm", "llm": {"model": "m", "base_url": "http://localhost:1/v1"}, "start_from_seed": False}
    assert OptimizeConfig(policy=llm).policy.from_scratch()
    assert TransferConfig(seed_first="never").start_first == "never"
    assert "start_file" in OptimizeConfig(seed_file="mine.py").model_dump()
