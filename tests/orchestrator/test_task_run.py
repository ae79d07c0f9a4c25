"""A task's turns that give no candidate: the agent tries again, stops after enough in a row, and the task says why."""

from __future__ import annotations

import pytest

from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.task import knobs as K
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.llm import ScriptedClient
from kernelkiln.testing.tasks import TASKS

TINY = TaskSpec(str(TASKS / "tiny_softmax.py"), {})
SEED = (CANDIDATES / "softmax_knobs.py").read_text()
PROSE = {"text": "I would fuse the passes.", "prompt_tokens": 400, "completion_tokens": 10}


def submit(code: str) -> dict:
    call = {"name": "submit_candidate", "arguments": {"code": code, "summary": "one pass", "adoptions": []}}
    return {"tool_calls": [call], "prompt_tokens": 600, "completion_tokens": 50}


def llm_config(budget: int, **policy) -> OptimizeConfig:
    return OptimizeConfig(
        guard=fast_config(),
        budget=budget,
        confirm_time_budget_s=None,
        context={"max_experiences": 0},
        policy={
            "kind": "llm",
            "reasks": 0,
            "llm": {"model": "m", "base_url": "http://127.0.0.1:9/v1", "reply_protocol": "tools"},
            **policy,
        },
    )


@pytest.fixture
def memory(sqlite_store):
    return Memory(sqlite_store)


def test_a_model_that_never_submits_after_the_seed_is_no_candidate_from_the_model(memory, tmp_path):
    # The limit is the config's: two turns in a row (one call each, no re-asks), then the agent stops.
    client = ScriptedClient([PROSE] * 2)
    cfg = llm_config(budget=3, max_turns_without_candidate=2)
    result = Optimizer(memory, tmp_path, client=client).start([TINY], cfg, tmp_path / "out")
    task = result.tasks["tiny_softmax"]
    assert client.remaining == 0 and task.attempts == 1 and task.start_speedup is not None
    assert task.status == "no candidate from the model" and task.turns_without_candidate == 2
    assert task.reason.startswith("a1 stopped after 2 turns in a row without a candidate; the last turn: ")
    assert "without calling submit_candidate" in task.reason
    assert (task.prompt_tokens, task.completion_tokens) == (800, 20)


def test_a_turn_without_a_candidate_does_not_end_the_agent(memory, tmp_path):
    client = ScriptedClient([PROSE, submit(K.apply(SEED, {"REPEAT": 1}))])
    result = Optimizer(memory, tmp_path, client=client).start([TINY], llm_config(budget=2), tmp_path / "out")
    task = result.tasks["tiny_softmax"]
    assert client.remaining == 0 and task.attempts == 2  # the seed, then the model's candidate
    assert (task.status, task.reason, task.turns_without_candidate) == ("evaluated", "", 1)
    assert (task.prompt_tokens, task.completion_tokens) == (1000, 60)


def test_a_budget_spent_on_the_seed_says_so(memory, tmp_path):
    client = ScriptedClient([])
    result = Optimizer(memory, tmp_path, client=client).start([TINY], llm_config(budget=1), tmp_path / "out")
    task = result.tasks["tiny_softmax"]
    assert (task.status, task.attempts) == ("no candidate from the model", 1)
    assert task.reason == "the task's budget of 1 evaluation went to the seed"


def test_the_tuners_seed_is_its_own_candidate(memory, tmp_path):
    cfg = OptimizeConfig(guard=fast_config(), budget=1, confirm_time_budget_s=None)
    result = Optimizer(memory, tmp_path).start([TINY], cfg, tmp_path / "out")
    assert result.tasks["tiny_softmax"].status == "evaluated"
