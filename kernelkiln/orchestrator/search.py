"""The search: one loop hands every agent's candidates to the evaluation pool and acts on the first result back.

Each agent has at most one piece of work outstanding: its next proposal (made in a thread
of its own: a model's reply takes seconds) or its candidate's verdict (a future of the
pool). The loop waits on all of them at once and, as each completes, moves its agent on:
submits the candidate, records the verdict, asks for the next proposal. Tasks start while
the pool has devices to spare (on this machine one at a time, so each task's lesson is
stored before the next task reads memory); each ends with its confirmation, which the
pool judges like any candidate. Every store write happens in this loop, with Ctrl-C held
back until the write ends; Ctrl-C anywhere else abandons the work in flight.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any, Literal

from kernelkiln.evaluation.pool import EvaluationInput
from kernelkiln.evaluation.threads import in_thread
from kernelkiln.orchestrator.agent import AgentState
from kernelkiln.orchestrator.confirm import confirmation, confirmation_input
from kernelkiln.orchestrator.interrupts import interrupts_deferred
from kernelkiln.orchestrator.observer import Observer
from kernelkiln.orchestrator.task_run import Judging, RunControl, TaskRunner
from kernelkiln.policy.turn import GaveUp, Proposal, Turn
from kernelkiln.store.records import Confirmation
from kernelkiln.task import Task

_ABORT_WAIT_S = 15.0  # Ctrl-C: a proposal in flight (a model's reply being recorded) gets this long to end


@dataclass
class _Task:
    """A started task as the loop sees it."""

    runner: TaskRunner
    stopped: set[str] = field(default_factory=set)  # agents that will take no more turns
    waiting: list[AgentState] = field(default_factory=list)  # agents waiting for a reservation in flight
    failed: bool = False  # a turn raised: the task is left unfinished, to resume


@dataclass(frozen=True)
class _Work:
    """What a future stands for."""

    seq: int
    kind: Literal["propose", "judge", "confirm"]
    task: _Task
    agent: AgentState | None = None
    judging: Judging | None = None
    item: EvaluationInput | None = None


class Search:
    """Runs tasks' agents to the end of their budgets, ``agents`` per task, through ``control.pool``."""

    def __init__(
        self,
        control: RunControl,
        observer: Observer,
        start: Callable[[Task], TaskRunner],
        end: Callable[[TaskRunner, Confirmation | None], None],
    ):
        """``start(task)``: the task's runner, its agents brought to where a resumed run left them;
        ``end(runner, confirmation)``: the task is finished (its record is saved there)."""
        self.control, self.observer, self.start, self.end = control, observer, start, end
        self.pool = control.pool
        self.config = control.config
        self.width = self.pool.tasks_at_once(self.config.agents)
        self.work: dict[Future[Any], _Work] = {}
        self.active: list[_Task] = []
        self._seq = itertools.count()

    def run(self, tasks: list[Task]) -> None:
        """Until every task is finished or the run stops; raises what stopped it, once work in flight is done."""
        pending = list(tasks)
        try:
            while True:
                self._fill(pending)
                if not self.work:
                    break
                done, _ = wait(list(self.work), return_when=FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: self.work[f].seq):
                    self._complete(future, self.work.pop(future))
        except KeyboardInterrupt:
            self._abort()
            raise
        if self.control.errors:
            raise self.control.errors[0]

    # -- tasks -------------------------------------------------------------------------
    def _fill(self, pending: list[Task]) -> None:
        """Start tasks while the pool has room for them (one at a time on this machine)."""
        while pending and self._places() < self.width and self.control.may_start():
            task = _Task(self.start(pending.pop(0)))
            self.active.append(task)
            for agent in task.runner.agents:
                self._next(task, agent)

    def _places(self) -> int:
        """Tasks holding a place: with room for several, a task leaves its place when its first agent stops,
        so the next one starts during its last round and its confirmation."""
        return sum(1 for t in self.active if self.width == 1 or not t.stopped)

    def _stop(self, task: _Task, agent: AgentState) -> None:
        task.stopped.add(agent.name)
        if len(task.stopped) == len(task.runner.agents):
            self._close(task)

    def _close(self, task: _Task) -> None:
        """Every agent stopped: store the task's end, then confirm its best."""
        runner = task.runner
        if task.failed:
            self._drop(task)
            return
        try:
            runner.finish()
            item = confirmation_input(runner.task, runner.state.incumbent, self.config)
        except Exception as exc:
            self._fail(task, exc)
            self._drop(task)
            return
        if item is None:
            self._finish(task, None)
            return
        self.pool.release(runner.task)  # the search's sessions close; the confirmation gets a fresh one
        self.observer.confirming(runner.state.task_id, item.guard.time_budget_s)
        self._add("confirm", self.pool.submit([item])[0], task, item=item)

    def _finish(self, task: _Task, confirmed: Confirmation | None) -> None:
        try:
            with interrupts_deferred():
                self.end(task.runner, confirmed)
        except Exception as exc:
            self._fail(task, exc)
        self._drop(task)

    def _drop(self, task: _Task) -> None:
        self.pool.release(task.runner.task)  # whatever sessions the task still holds close
        self.active.remove(task)

    # -- an agent's turns ----------------------------------------------------------------
    def _next(self, task: _Task, agent: AgentState) -> None:
        """The agent's next proposal, asked for in a thread; or the agent stops (or waits for a reservation)."""
        if agent.exhausted or not self.control.may_start():
            self._stop(task, agent)
            return
        reserved = task.runner.state.take()
        if reserved is None:
            task.waiting.append(agent)
            return
        if not reserved:
            self._stop(task, agent)
            return
        runner = task.runner

        def propose() -> tuple[Turn, Proposal | GaveUp | None]:
            turn = runner.turn_for(agent)
            return turn, agent.policy.propose(turn)

        self._add("propose", in_thread(propose, name=f"kiln-{agent.name}"), task, agent=agent)

    def _complete(self, future: Future[Any], work: _Work) -> None:
        task = work.task
        if work.kind == "confirm":
            assert work.item is not None
            try:
                verdict = future.result()
            except Exception as exc:
                self._fail(task, exc)
                self._drop(task)
                return
            best = task.runner.state.incumbent
            assert best is not None
            self._finish(task, confirmation(best, work.item, verdict))
            return
        agent, state = work.agent, task.runner.state
        assert agent is not None
        try:
            if work.kind == "propose":
                turn, proposal = future.result()
                judging = task.runner.begin(agent, turn, proposal)
                if judging is None:
                    state.give_back()
                else:
                    self._add("judge", self.pool.submit([judging.item])[0], task, agent=agent, judging=judging)
                    return
            else:
                assert work.judging is not None
                task.runner.judged(work.judging, future.result())
                state.evaluated_one()
        except Exception as exc:
            state.give_back()
            self._fail(task, exc)
            self._stop(task, agent)
            self._wake(task)
            return
        self._next(task, agent)
        self._wake(task)

    def _wake(self, task: _Task) -> None:
        """A turn ended: agents waiting for its reservation ask again."""
        waiting, task.waiting = task.waiting, []
        for agent in waiting:
            self._next(task, agent)

    def _add(self, kind: Literal["propose", "judge", "confirm"], future: Future[Any], task: _Task, **what: Any) -> None:
        self.work[future] = _Work(next(self._seq), kind, task, **what)

    def _fail(self, task: _Task, error: BaseException) -> None:
        task.failed = True
        self.control.fail(error)

    def _abort(self) -> None:
        """Ctrl-C: evaluations in flight end with their sessions; proposals get a moment to finish."""
        self.control.stop.set()
        for task in self.active:
            self.pool.release(task.runner.task)
        proposals = [f for f, w in self.work.items() if w.kind == "propose"]
        if proposals:
            wait(proposals, timeout=_ABORT_WAIT_S)
