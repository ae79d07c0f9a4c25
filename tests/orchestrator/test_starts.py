"""Where agents start: --start FILE, else the task's KILN start, else the candidate generated from its reference."""

from __future__ import annotations

import pydantic
import pytest

from kernelkiln.errors import UserError
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.orchestrator.starts import starting_code
from kernelkiln.task import knobs as K
from kernelkiln.task import load_task
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.tasks import TASKS

LLM = {"kind": "llm", "llm": {"model": "m", "base_url": "http://127.0.0.1:9/v1"}}
SOFTMAX_START = CANDIDATES / "softmax_knobs.py"


def config(**overrides) -> OptimizeConfig:
    return OptimizeConfig(guard=fast_config(), **overrides)


@pytest.fixture
def softmax():
    return load_task(TASKS / "tiny_softmax.py")  # has a KILN start


@pytest.fixture
def relu():
    return load_task(TASKS / "tiny_relu.py")  # has none; kernelkiln lowers it


@pytest.fixture
def unlowerable():
    return load_task(TASKS / "tiny_sort.py")  # no KILN start, and kernelkiln cannot lower aten.sort


@pytest.fixture
def own_start(tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(K.apply(SOFTMAX_START.read_text(), {"REPEAT": 1}))
    return path


def test_a_seed_file_beats_the_tasks_kiln_seed(softmax, own_start):
    code, origin = starting_code(softmax, config(start_file=str(own_start)))
    assert code == own_start.read_text() and origin == str(own_start)


def test_the_tasks_kiln_seed_beats_the_generated_candidate(softmax):
    code, origin = starting_code(softmax, config())
    assert code == SOFTMAX_START.read_text() and origin == str(softmax.start_for("cpu"))


def test_a_task_without_a_seed_starts_from_the_candidate_generated_from_its_reference(relu):
    code, origin = starting_code(relu, config())
    assert origin == "generated from the reference"
    assert "class ModelNew" in code and K.read_knobs(code)  # something the tuner can search


def test_a_seed_file_beats_the_generated_candidate_too(relu, own_start):
    assert starting_code(relu, config(start_file=str(own_start))) == (own_start.read_text(), str(own_start))


def test_the_tuner_without_any_seed_says_the_lowering_cannot_generate_one(unlowerable):
    with pytest.raises(
        UserError,
        match=r"the tuner needs a starting candidate that declares KNOBS, and kernelkiln cannot "
        r"generate one: no lowering yet for aten\.sort; give one with --start FILE",
    ):
        starting_code(unlowerable, config())


def test_the_llm_policy_writes_from_scratch_when_no_seed_can_be_had(unlowerable):
    code, origin = starting_code(unlowerable, config(policy=LLM))
    assert code == "" and "no lowering yet for aten.sort" in origin


def test_no_seed_with_the_llm_policy_starts_from_nothing_even_when_a_seed_exists(softmax):
    assert starting_code(softmax, config(policy={**LLM, "start_from_seed": False}))[0] == ""


def test_an_unreadable_seed_file_is_a_user_error_naming_it(softmax, tmp_path):
    missing = tmp_path / "no_such_seed.py"
    with pytest.raises(UserError, match=r"cannot read --start .*no_such_seed\.py"):
        starting_code(softmax, config(start_file=str(missing)))


def test_the_tuner_has_no_no_seed_and_an_old_config_asking_for_it_is_refused_in_its_words():
    with pytest.raises(pydantic.ValidationError, match="start_from_seed"):
        config(policy={"kind": "tuner", "start_from_seed": False})
    with pytest.raises(ValueError, match="the tuner searches a seed candidate's knobs"):
        OptimizeConfig.stored({"policy": "tuner", "start_from_seed": False})


def test_a_seed_file_and_no_seed_contradict_each_other(own_start):
    with pytest.raises(pydantic.ValidationError, match="--start FILE and --from-scratch contradict"):
        config(policy={**LLM, "start_from_seed": False}, start_file=str(own_start))


def test_a_seed_file_starts_one_task_only(sqlite_store, tmp_path, own_start):
    specs = [TaskSpec(str(TASKS / "tiny_softmax.py"), {}), TaskSpec(str(TASKS / "tiny_relu.py"), {})]
    with pytest.raises(UserError, match="--start FILE starts one task; this run has 2"):
        Optimizer(Memory(sqlite_store), tmp_path).start(specs, config(start_file=str(own_start)), tmp_path / "out")
    with sqlite_store.read() as conn:
        assert not sqlite_store.runs.all(conn)  # refused before the run existed


def test_the_tuner_on_a_task_without_a_kiln_seed_evaluates_the_generated_candidate_first(sqlite_store, tmp_path):
    memory = Memory(sqlite_store)
    cfg = config(budget=2, confirm_time_budget_s=None)
    result = Optimizer(memory, tmp_path).start([TaskSpec(str(TASKS / "tiny_relu.py"), {})], cfg, tmp_path / "out")
    with memory.store.read() as conn:
        stored = memory.store.attempts.for_run(conn, result.run_id)
    assert result.status == "done" and len(stored) == 2
    assert stored[0].case.move == "seed" and stored[0].correct  # correctness only: no claim about speed
    assert stored[0].code == starting_code(load_task(TASKS / "tiny_relu.py"), cfg)[0]
