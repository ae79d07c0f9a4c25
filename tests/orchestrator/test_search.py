"""The search loop: every agent's candidate in flight at once through one loop, verdicts in any order."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future

from kernelkiln.evaluation.pool import EvaluationInput
from kernelkiln.guard.verdict import Verdict
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.results import RunResult
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.simulated_pool import SimulatedPool, simulated_verdict
from kernelkiln.testing.tasks import TASKS

TINY = TaskSpec(str(TASKS / "tiny_softmax.py"), {})


class HeldPool(SimulatedPool):
    """Verdicts the test hands back itself, in the order it chooses: nothing completes on its own."""

    def __init__(self) -> None:
        super().__init__(devices=8, duration_s=0.0)
        self.held: list[tuple[EvaluationInput, Future[Verdict]]] = []
        self.changed = threading.Condition()

    def submit(self, inputs: Sequence[EvaluationInput]) -> list[Future[Verdict]]:
        futures: list[Future[Verdict]] = [Future() for _ in inputs]
        with self.changed:
            self.held.extend(zip(inputs, futures, strict=True))
            self.changed.notify_all()
        return futures

    def wait_for(self, count: int) -> list[tuple[EvaluationInput, Future[Verdict]]]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.held) >= count, timeout=60), self.held
            taken, self.held = self.held[:count], self.held[count:]
        return taken


def _verdict(item: EvaluationInput) -> Verdict:
    return simulated_verdict(["small"], item.code, item.incumbent, item.timed, "held", 0.0)


def test_every_agents_candidate_is_in_flight_at_once_and_a_later_one_may_come_back_first(tmp_path, sqlite_store):
    pool = HeldPool()
    config = OptimizeConfig(guard=fast_config(), agents=3, budget=3, confirm_time_budget_s=None)
    results: list[RunResult] = []
    runner = threading.Thread(
        target=lambda: results.append(Optimizer(Memory(sqlite_store), tmp_path, pool=pool).start([TINY], config))
    )
    runner.start()
    first = pool.wait_for(3)  # all three agents' candidates, submitted before any verdict came back
    assert len({item.code for item, _ in first}) == 3
    for item, future in reversed(first):  # the last submitted is judged first
        future.set_result(_verdict(item))
    runner.join(60)
    assert not runner.is_alive()
    (result,) = results
    assert result.status == "done" and result.tasks["tiny_softmax"].attempts == 3
    assert pool.held == []  # the budget was three: nothing more was submitted


def test_an_evaluation_that_fails_stops_the_run_with_its_error_after_the_others_are_recorded(tmp_path, sqlite_store):
    pool = HeldPool()
    config = OptimizeConfig(guard=fast_config(), agents=2, budget=4, confirm_time_budget_s=None)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            Optimizer(Memory(sqlite_store), tmp_path, pool=pool).start([TINY], config)
        except BaseException as exc:
            errors.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    (_, failed), (item, judged) = pool.wait_for(2)
    failed.set_exception(RuntimeError("the device caught fire"))
    judged.set_result(_verdict(item))
    runner.join(60)
    assert not runner.is_alive()
    assert [str(e) for e in errors] == ["the device caught fire"]
    with sqlite_store.read() as conn:
        run = sqlite_store.runs.all(conn)[-1]
        stored = sqlite_store.attempts.for_run(conn, run.id)
    assert run.state.status == "failed" and [a.code for a in stored] == [item.code]
