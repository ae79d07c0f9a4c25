"""Runs of the optimizer end to end on the tiny task: persistence, outputs, memory, resume."""

from __future__ import annotations

import re

import pytest

from kernelkiln.errors import UserError
from kernelkiln.guard import GuardSession
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.results import RunResult
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.store.records import Experience
from kernelkiln.task import knobs as K
from kernelkiln.task import load_task
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.llm import ScriptedClient
from kernelkiln.testing.tasks import TASKS

TINY = TaskSpec(str(TASKS / "tiny_softmax.py"), {})
SEED = (CANDIDATES / "softmax_knobs.py").read_text()


def config(**overrides) -> OptimizeConfig:
    return OptimizeConfig(guard=fast_config(), **overrides)


@pytest.fixture
def memory(sqlite_store):
    return Memory(sqlite_store)


def attempts(memory: Memory, run_id: str):
    with memory.store.read() as conn:
        return memory.store.attempts.for_run(conn, run_id)


def test_a_tuner_run_stores_every_attempt_and_writes_best_py_and_run_json(memory, tmp_path):
    result = Optimizer(memory, tmp_path).start([TINY], config(budget=3), tmp_path / "out")
    task = result.tasks["tiny_softmax"]
    assert result.status == "done" and task.attempts == 3 == sum(task.verdicts.values())
    # Figures only: two measurements of different candidates promise no order between them.
    assert task.start_speedup > 0 and task.best_speedup > 0
    assert RunResult.model_validate_json((tmp_path / "out" / "run.json").read_text()) == result
    stored = attempts(memory, result.run_id)
    assert len(stored) == 3 and stored[0].case.move == "seed" and stored[0].verdict == "KEEP"
    assert len({a.case.code_hash for a in stored}) == 3  # nothing evaluated twice
    best = (tmp_path / "out" / "tiny_softmax" / "best.py").read_text()
    assert task.best.endswith("best.py") and K.read_knobs(best)
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), fast_config()) as guard:
        assert guard.evaluate(best, timed=False).correct  # a standalone candidate, as `kiln eval` takes it


def test_each_tasks_best_is_judged_again_and_that_figure_is_recorded(memory, tmp_path):
    result = Optimizer(memory, tmp_path).start([TINY], config(budget=2), tmp_path / "out")
    task = result.tasks["tiny_softmax"]
    confirmation = task.confirmation
    assert confirmation is not None and confirmation.attempt_id == task.best_attempt and confirmation.correct
    assert task.confirmed_speedup == confirmation.speedup > 0
    assert confirmation.time_budget_s == 20.0 and set(confirmation.workloads) == {"w0", "w1"}
    with memory.store.read() as conn:
        stored = memory.store.runs.get(conn, result.run_id).state.confirmed
    assert stored["tiny_softmax"] == confirmation  # a resumed or reported run finds it


def test_without_a_confirmation_budget_the_search_figure_stands_alone(memory, tmp_path):
    result = Optimizer(memory, tmp_path).start([TINY], config(budget=2, confirm_time_budget_s=None), tmp_path / "out")
    task = result.tasks["tiny_softmax"]
    assert task.confirmation is None and task.confirmed_speedup is None and task.best_speedup > 0


def test_every_new_best_derived_from_a_parent_leaves_an_experience(memory, tmp_path):
    result = Optimizer(memory, tmp_path).start([TINY], config(budget=4), tmp_path / "out")
    stored = attempts(memory, result.run_id)
    with memory.store.read() as conn:
        sources = {e.source_attempt_id for e in memory.store.experiences.list(conn, kind="experience")}
    wins = [a for a in stored if a.verdict == "KEEP" and a.parent_id is not None]
    assert wins, [(a.verdict, a.parent_id) for a in stored]  # else the check below holds vacuously
    assert all(a.id in sources for a in wins)
    assert stored[0].id not in sources  # the seed itself teaches nothing


def test_a_later_task_applies_a_retrieved_configuration_first_and_records_the_adoption(memory, tmp_path):
    lesson = Experience(
        text="softmax on cpu: REPEAT=1 made it 4x faster",
        platform="cpu",
        op_family="softmax",
        stage="optimization",
        conditions=[K.condition("REPEAT", 1)],
    )
    memory.add_experience(lesson)
    result = Optimizer(memory, tmp_path).start([TINY], config(budget=2), tmp_path / "out")
    second = attempts(memory, result.run_id)[1]
    assert second.case.move == "experience" and second.case.knobs["REPEAT"] == 1
    with memory.store.read() as conn:
        records = {a.experience_id: a.adopted for a in memory.store.adoptions.for_attempt(conn, second.id)}
    assert records[lesson.id] is True


def test_a_runs_memory_settings_take_effect(memory, tmp_path):
    Optimizer(memory, tmp_path).start([TINY], config(budget=2, memory={"board": {"auto_post": False}}), tmp_path / "a")
    with memory.store.read() as conn:
        assert memory.store.board.count(conn) == 0
    Optimizer(memory, tmp_path).start([TINY], config(budget=2, policy={"kind": "tuner", "seed": 1}), tmp_path / "b")
    with memory.store.read() as conn:
        assert memory.store.board.count(conn) > 0


def test_resuming_continues_without_repeating_or_losing_an_attempt(memory, tmp_path):
    optimizer = Optimizer(memory, tmp_path)
    first = optimizer.start([TINY], config(budget=2), tmp_path / "out")
    run_id = first.run_id
    # Pretend the run was interrupted after two evaluations of a budget of five.
    with memory.store.write() as conn:
        run = memory.store.runs.get(conn, run_id)
        memory.store.runs.update(
            conn,
            run.model_copy(
                update={
                    "config": {**run.config, "budget": 5},
                    "state": run.state.model_copy(update={"status": "interrupted", "finished": []}),
                }
            ),
        )
    resumed = Optimizer(Memory(memory.store), tmp_path).resume(run_id)
    stored = attempts(memory, run_id)
    assert resumed.status == "done" and resumed.tasks["tiny_softmax"].attempts == 5 == len(stored)
    assert len({a.case.code_hash for a in stored}) == 5
    with pytest.raises(UserError, match="already finished"):
        optimizer.resume(run_id)


def test_a_run_stored_by_an_earlier_version_with_flat_policy_keys_resumes(memory, tmp_path):
    optimizer = Optimizer(memory, tmp_path)
    run_id = optimizer.start([TINY], config(budget=2), tmp_path / "out").run_id
    with memory.store.write() as conn:
        run = memory.store.runs.get(conn, run_id)
        flat = {k: v for k, v in run.config.items() if k != "policy"}
        flat.update(policy="tuner", search="enumerate", seed=1, tool_calls=4, reasks=2, llm=None, record=None)
        flat.update(replay=None, start_from_seed=True, budget=4)  # as run.config was written, every key flat
        state = run.state.model_copy(update={"status": "interrupted", "finished": []})
        memory.store.runs.update(conn, run.model_copy(update={"config": flat, "state": state}))
    resumed = Optimizer(Memory(memory.store), tmp_path).resume(run_id)
    assert resumed.status == "done" and resumed.tasks["tiny_softmax"].attempts == 4


def test_resume_of_an_unknown_run_is_a_one_line_error(memory, tmp_path):
    with pytest.raises(UserError, match="no optimizer run"):
        Optimizer(memory, tmp_path).resume("r-missing")


def test_the_tuner_without_a_seed_names_the_operations_kernelkiln_cannot_lower(memory, tmp_path):
    with pytest.raises(
        UserError,
        match=r"needs a starting candidate that declares KNOBS, and kernelkiln cannot generate "
        r"one: no lowering yet for aten\.sort",
    ):
        Optimizer(memory, tmp_path).start([TaskSpec(str(TASKS / "tiny_sort.py"), {})], config(), tmp_path)


def test_two_agents_get_different_lenses_and_never_evaluate_the_same_code(memory, tmp_path):
    result = Optimizer(memory, tmp_path).start([TINY], config(agents=2, budget=4), tmp_path / "out")
    stored = attempts(memory, result.run_id)
    assert len(stored) == 4 and {a.agent for a in stored} == {"a1", "a2"}
    assert len({a.lens for a in stored}) == 2
    assert len({a.case.code_hash for a in stored}) == 4


def test_a_token_budget_stops_the_run_after_the_turn_that_reached_it(memory, tmp_path):
    better = K.apply(SEED, {"REPEAT": 1})
    reply = {
        "tool_calls": [
            {"name": "submit_candidate", "arguments": {"code": better, "summary": "one pass", "adoptions": []}}
        ],
        "prompt_tokens": 900,
        "completion_tokens": 200,
    }
    client = ScriptedClient([reply, reply])
    cfg = config(
        policy={"kind": "llm", "llm": {"model": "m", "base_url": "http://127.0.0.1:9/v1"}},
        budget=5,
        max_tokens=1000,
        context={"max_experiences": 0},
    )
    result = Optimizer(memory, tmp_path, client=client).start([TINY], cfg, tmp_path / "out")
    task = result.tasks["tiny_softmax"]
    assert result.status == "stopped" and task.attempts == 2  # the seed (no call), then one model turn
    assert (task.prompt_tokens, task.completion_tokens) == (900, 200)


def test_an_llm_run_records_each_calls_tokens_and_adoptions(memory, tmp_path):
    def submit(messages, tools):
        ids = list(dict.fromkeys(re.findall(r"\be-[0-9a-f]{16}\b", messages[1].content)))
        return {
            "tool_calls": [
                {
                    "name": "submit_candidate",
                    "arguments": {
                        "code": K.apply(SEED, {"REPEAT": 2}),
                        "summary": "fewer passes",
                        "adoptions": [{"experience_id": i, "adopted": True, "why": "it applies"} for i in ids],
                    },
                }
            ]
        }

    client = ScriptedClient([submit])
    cfg = config(policy={"kind": "llm", "llm": {"model": "m", "base_url": "http://127.0.0.1:9/v1"}}, budget=2)
    result = Optimizer(memory, tmp_path, client=client).start([TINY], cfg, tmp_path / "out")
    stored = attempts(memory, result.run_id)
    assert [a.case.move for a in stored] == ["seed", "llm"]
    assert stored[1].tokens_in > 0 and stored[1].case.calls == [(stored[1].tokens_in, stored[1].tokens_out)]
    assert result.tasks["tiny_softmax"].prompt_tokens == stored[1].tokens_in


def test_a_task_whose_model_never_submits_says_why_and_counts_every_call(memory, tmp_path):
    plain = TaskSpec(str(TASKS / "tiny_relu.py"), {})  # --from-scratch: nothing to evaluate unless the model writes it
    # Three turns of three calls (the reply and two re-asks): three turns in a row without a candidate stop it.
    client = ScriptedClient([{"text": "I would vectorize it.", "prompt_tokens": 500, "completion_tokens": 20}] * 9)
    cfg = config(
        policy={
            "kind": "llm",
            "start_from_seed": False,
            "llm": {"model": "m", "base_url": "http://127.0.0.1:9/v1", "reply_protocol": "tools"},
        },
        budget=2,
    )
    result = Optimizer(memory, tmp_path, client=client).start([plain], cfg, tmp_path / "out")
    task = result.tasks["tiny_relu"]
    assert (task.status, task.attempts, task.turns_without_candidate) == ("no candidate", 0, 3)
    assert task.reason.startswith("a1 stopped after 3 turns in a row without a candidate; the last turn: ")
    assert "submit_candidate" in task.reason and client.remaining == 0
    assert (
        (task.prompt_tokens, task.completion_tokens) == (4500, 180) == (result.prompt_tokens, result.completion_tokens)
    )
    with memory.store.read() as conn:
        stored = memory.store.runs.get(conn, result.run_id).state.no_candidate["tiny_relu"]
    assert (stored.turns, stored.prompt_tokens) == (3, 4500)  # a resumed run or a report finds it


def test_a_suite_runs_easy_tasks_first_by_level_then_by_work():
    from types import SimpleNamespace

    from kernelkiln.orchestrator.run import order_tasks

    def task(name, level, flops):
        return SimpleNamespace(name=name, level=level, workloads=[SimpleNamespace(flops=flops)])

    tasks = [task("block", 3, 1.0), task("big_gemm", 1, 1e9), task("tiny_add", 1, 1e3), task("fused", 2, 1.0)]
    assert [t.name for t in order_tasks(tasks)] == ["tiny_add", "big_gemm", "fused", "block"]


def test_an_agent_that_keeps_proposing_evaluated_code_is_stopped(memory, tmp_path):
    repeat = {
        "tool_calls": [
            {"name": "submit_candidate", "arguments": {"code": SEED, "summary": "the seed again", "adoptions": []}}
        ],
        "prompt_tokens": 300,
        "completion_tokens": 30,
    }
    client = ScriptedClient([repeat] * 3)
    cfg = config(
        policy={"kind": "llm", "llm": {"model": "m", "base_url": "http://127.0.0.1:9/v1"}},
        budget=5,
        context={"max_experiences": 0},
    )
    result = Optimizer(memory, tmp_path, client=client).start([TINY], cfg, tmp_path / "out")
    task = result.tasks["tiny_softmax"]
    assert task.attempts == 1 and client.remaining == 0
    # Only the seed was evaluated: the model's repeats are turns without a candidate, their calls counted.
    assert task.status == "no candidate from the model" and task.turns_without_candidate == 3
    assert task.reason.startswith("a1 stopped after 3 proposals in a row of code already evaluated")
    assert (task.prompt_tokens, task.completion_tokens) == (900, 90)


def test_a_candidate_whose_adoption_record_is_incomplete_is_evaluated_against_a_real_endpoint(
    memory, tmp_path, monkeypatch
):
    # The model: a valid candidate with {"adopted": [], "not_adopted": []} while experiences were shown.
    from kernelkiln.testing.llm import LoopbackServer

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    memory.add_experience(
        Experience(text="softmax on cpu: one pass", platform="cpu", op_family="softmax", stage="optimization")
    )
    arguments = {"code": K.apply(SEED, {"REPEAT": 2}), "summary": "fewer passes", "adoptions": []}
    bare = {"tool_calls": [{"name": "submit_candidate", "arguments": arguments}]}
    with LoopbackServer([bare, bare]) as server:
        llm = {"model": "m", "base_url": server.base_url, "max_retries": 0, "reply_protocol": "tools"}
        cfg = config(policy={"kind": "llm", "llm": llm}, budget=2)
        result = Optimizer(memory, tmp_path).start([TINY], cfg, tmp_path / "out")
        served = len(server.requests)
    task = result.tasks["tiny_softmax"]
    stored = attempts(memory, result.run_id)
    assert [a.case.move for a in stored] == ["seed", "llm"] and stored[1].verdict in ("KEEP", "ACCEPT", "REVERT")
    assert task.status == "evaluated" and task.adoptions_owed >= 1
    assert task.adoptions_not_stated == task.adoptions_owed == len(stored[1].case.not_stated)
    assert served == 2  # the candidate's request, then one for the record alone
    with memory.store.read() as conn:
        assert memory.store.adoptions.for_attempt(conn, stored[1].id) == []  # no credit from what was not stated
