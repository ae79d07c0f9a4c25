"""The policy each agent gets from the run's typed policy config."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from kernelkiln.agents.config import LLMPolicyConfig, PolicyConfig, ReplayConfig, TunerConfig
from kernelkiln.agents.llm import LLMPolicy
from kernelkiln.agents.policies import RunPolicies
from kernelkiln.agents.replay import ReplayPolicy
from kernelkiln.agents.tuner import Tuner
from kernelkiln.context.config import ContextConfig
from kernelkiln.llm.record import RecordingClient
from kernelkiln.testing.llm import ScriptedClient
from kernelkiln.testing.sessions import SESSIONS

POLICY = TypeAdapter(PolicyConfig)
LLM = {"model": "m", "base_url": "http://127.0.0.1:9/v1"}


def test_the_tuner_searches_with_tpe_unless_the_config_asks_for_the_enumerate_search():
    default = RunPolicies(TunerConfig(), ContextConfig()).make("a0", "t")
    chosen = RunPolicies(TunerConfig(search="enumerate"), ContextConfig()).make("a0", "t")
    assert isinstance(default, Tuner) and default.search == "tpe"
    assert isinstance(chosen, Tuner) and chosen.search == "enumerate"


def test_an_unknown_search_is_refused():
    with pytest.raises(ValidationError, match="search"):
        TunerConfig(search="grid")


def test_the_kind_chooses_the_config_and_a_field_of_another_policy_is_unknown():
    assert isinstance(POLICY.validate_python({"kind": "llm", "llm": LLM}), LLMPolicyConfig)
    assert isinstance(POLICY.validate_python({"kind": "replay", "session": "s"}), ReplayConfig)
    for wrong in ({"kind": "llm", "llm": LLM, "search": "tpe"}, {"kind": "tuner", "record": "d"}):
        with pytest.raises(ValidationError, match="Extra inputs"):
            POLICY.validate_python(wrong)


def test_a_policys_required_input_is_asked_for_by_its_flag():
    with pytest.raises(ValidationError, match="needs a model: --model NAME"):
        LLMPolicyConfig()
    with pytest.raises(ValidationError, match="needs a recorded session: --replay DIR"):
        ReplayConfig()
    with pytest.raises(ValidationError, match="name the same directory"):
        ReplayConfig(session="s", record="./s")


def test_the_llm_policy_gets_the_run_context_and_a_recording_client_when_it_records(tmp_path):
    context = ContextConfig(mode="passive")
    made = RunPolicies(LLMPolicyConfig(llm=LLM, record=str(tmp_path)), context, ScriptedClient([])).make("a1", "t")
    assert isinstance(made, LLMPolicy) and made.context is context and isinstance(made.client, RecordingClient)


def test_the_replay_answers_with_the_recorded_model_and_the_replay_configs_limits():
    made = RunPolicies(ReplayConfig(session=str(SESSIONS / "tools_one_agent"), reasks=5), ContextConfig()).make(
        "a1", "tiny_softmax"
    )
    assert isinstance(made, ReplayPolicy) and isinstance(made.inner, LLMPolicy)
    assert made.inner.config.llm.model == "scripted" and made.inner.config.reasks == 5


def test_only_the_tuner_needs_a_seed_and_only_a_model_may_start_from_scratch():
    assert TunerConfig().needs_start and not LLMPolicyConfig(llm=LLM).needs_start
    assert not TunerConfig().from_scratch() and LLMPolicyConfig(llm=LLM, start_from_candidate=False).from_scratch()
    assert TunerConfig().for_repeat(3).seed == 3 and LLMPolicyConfig(llm=LLM).for_repeat(3) == LLMPolicyConfig(llm=LLM)
