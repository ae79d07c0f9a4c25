"""Runs that learn from stored tasks: exact reuse, transfer, read-only memory, private or shared agents."""

from __future__ import annotations

import hashlib

import pytest

from kernelkiln.memory.config import MemoryConfig
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.agent import AgentState, TaskState
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.observer import Observer
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.orchestrator.task_run import RunControl, TaskRunner
from kernelkiln.store import open_store
from kernelkiln.store.records import Attempt
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.simulated_pool import SimulatedPool
from kernelkiln.testing.tasks import TASKS
from kernelkiln.testing.turns import lens, tiny_task

TINY = TaskSpec(str(TASKS / "tiny_softmax.py"), {})


def config(**overrides) -> OptimizeConfig:
    return OptimizeConfig(guard=fast_config(), confirm_time_budget_s=None, **overrides)


def attempts(memory: Memory, run_id: str):
    with memory.store.read() as conn:
        return memory.store.attempts.for_run(conn, run_id)


def test_a_task_run_again_starts_from_its_stored_best_and_tries_no_stored_setting_again(sqlite_store, tmp_path):
    # Verdicts fixed by the code (a simulated device): the stored best cannot depend on a busy machine's timing.
    memory, pool = Memory(sqlite_store), SimulatedPool(devices=1, duration_s=0.0)
    run = Optimizer(memory, tmp_path, pool=pool).start([TINY], config(budget=4), tmp_path / "1")
    first = attempts(memory, run.run_id)
    best = max((a for a in first if a.verdict == "KEEP"), key=lambda a: a.speedup)
    run = Optimizer(memory, tmp_path, pool=pool).start([TINY], config(budget=4), tmp_path / "2")
    second = attempts(memory, run.run_id)
    assert second[0].case.move == "reuse" and second[0].code == best.code
    assert not {a.case.code_hash for a in second[1:]} & {a.case.code_hash for a in first}
    assert {a.case.signature for a in first + second} == {first[0].case.signature} != {""}
    with sqlite_store.read() as conn:
        assert [s.task_id for s in sqlite_store.signatures.on_machine(conn, "cpu", _machine(sqlite_store))] == [
            "tiny_softmax"
        ]


def _machine(store) -> str:
    with store.read() as conn:
        return conn.exec_driver_sql("SELECT machine FROM signatures").scalar_one()


def test_without_exact_reuse_the_second_run_starts_from_the_seed(sqlite_store, tmp_path):
    memory = Memory(sqlite_store)
    Optimizer(memory, tmp_path).start([TINY], config(budget=2), tmp_path / "1")
    off = config(budget=2, memory=MemoryConfig(transfer={"exact": False, "neighbours": 0}))
    second = attempts(memory, Optimizer(memory, tmp_path).start([TINY], off, tmp_path / "2").run_id)
    assert second[0].case.move == "seed"


def test_read_only_memory_applies_the_lent_store_and_never_writes_it(sqlite_store, tmp_path):
    Optimizer(Memory(sqlite_store), tmp_path).start([TINY], config(budget=3), tmp_path / "1")
    path = sqlite_store.engine.url.database
    sqlite_store.close()
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    lent = open_store(f"sqlite:///{path}", readonly=True)
    own = open_store(f"sqlite:///{tmp_path / 'own.db'}")
    memory = Memory(own, lent=lent)
    readonly = config(budget=3, memory=MemoryConfig(readonly=True))
    result = Optimizer(memory, tmp_path).start([TINY], readonly, tmp_path / "2")
    made = attempts(memory, result.run_id)
    assert made[0].case.move == "reuse" and len(made) == 3
    with own.read() as conn:
        assert own.experiences.count(conn, "experience") == 0 and own.stages.count_since(conn, 0) == 0
    lent.close()
    assert hashlib.sha256(open(path, "rb").read()).hexdigest() == digest


def test_read_only_memory_without_its_lent_store_is_refused():
    with pytest.raises(Exception, match="read-only memory needs the store it is lent from"):
        Memory(open_store("sqlite:////tmp/kiln-unused-readonly-test.db"), MemoryConfig(readonly=True))


def _runner(store, shared: bool) -> tuple[TaskRunner, AgentState]:
    """A task runner with two agents that each made one attempt; the board shared or not."""
    agents = [AgentState(name=name, lens=lens(), policy=_Layered(), code="") for name in ("a1", "a2")]
    for agent, verdict in zip(agents, ("KEEP", "REVERT"), strict=True):
        agent.history.append(Attempt(task_id="tiny_softmax", agent=agent.name, verdict=verdict))
    cfg = config(agents=2, memory=MemoryConfig(board={"shared": shared}))
    return TaskRunner(
        tiny_task(), TaskState("tiny_softmax", 2), agents, Memory(store), RunControl(cfg), "r", Observer()
    ), agents[0]


class _Layered:
    layered = True


def test_agents_sharing_the_board_see_each_others_trials_and_private_ones_do_not(sqlite_store):
    shared, a1 = _runner(sqlite_store, True)
    assert [a.agent for a in shared.turn_for(a1).peers] == ["a2"]
    private, a1 = _runner(sqlite_store, False)
    assert private.turn_for(a1).peers == ()


@pytest.mark.parametrize(
    ("start_first", "generated", "first"),
    [("generated", True, True), ("generated", False, False), ("always", False, True), ("never", True, False)],
)
def test_start_first_follows_where_the_starting_candidate_came_from(sqlite_store, start_first, generated, first):
    cfg = config(memory=MemoryConfig(transfer={"start_first": start_first}))
    agent = AgentState(name="a1", lens=lens(), policy=_Layered(), code="")
    runner = TaskRunner(
        tiny_task(),
        TaskState("tiny_softmax", 2),
        [agent],
        Memory(sqlite_store, cfg.memory),
        RunControl(cfg),
        "r",
        Observer(),
        generated=generated,
    )
    assert runner.prior.start_first is first
