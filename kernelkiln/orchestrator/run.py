"""A Run: the optimizer over one task or a suite, persisted as it goes and resumable.

The run's record holds everything needed to resume it: its configuration (``Run.config``)
and where it stands (``Run.state``: its tasks, which are finished, their confirmations);
its attempts are the rest. Resuming replays the stored attempts
through the agents' states and policies, so no evaluated attempt is lost or repeated.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelkiln.agents.policies import RunPolicies
from kernelkiln.errors import UserError
from kernelkiln.evaluation.open_pool import open_pool
from kernelkiln.evaluation.pool import EvaluationPool
from kernelkiln.llm.client import ChatClient
from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.agent import AgentState, TaskState, advance
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.model_waits import AgentWaits, UnconfirmedLedger
from kernelkiln.orchestrator.observer import Observer
from kernelkiln.orchestrator.replay_settings import check_replay
from kernelkiln.orchestrator.results import RunResult, got_candidate, write_outputs
from kernelkiln.orchestrator.search import Search
from kernelkiln.orchestrator.starts import GENERATED, measured_starts, starting_code
from kernelkiln.orchestrator.task_run import RunControl, TaskRunner, task_id_of
from kernelkiln.platforms import get_platform
from kernelkiln.policy.lens import assign_lenses
from kernelkiln.store.records import (
    Attempt,
    Confirmation,
    NoCandidate,
    Run,
    RunState,
    RunStatus,
    RunTask,
    Unconfirmed,
)
from kernelkiln.task import Task, load_task


class Interrupted(Exception):
    """The run was stopped with Ctrl-C; ``result`` holds what it had finished."""

    def __init__(self, result: RunResult):
        super().__init__(f"interrupted: resume with `kiln optimize --resume {result.run_id}`")
        self.result = result


@dataclass(frozen=True)
class TaskSpec:
    """A task file and its size overrides, as a run records them."""

    path: str
    overrides: dict[str, Any]


def order_tasks(tasks: list[Task]) -> list[Task]:
    """Easy tasks first: by KernelBench level, then by the reference's work (FLOPs when known), then name."""

    def work(task: Task) -> float:
        return sum(w.flops or 0.0 for w in task.workloads)

    return sorted(tasks, key=lambda t: (t.level, work(t), t.name))


class Optimizer:
    """Starts and resumes runs over one store."""

    def __init__(
        self,
        memory: Memory,
        out_root: Path,
        observer: Observer | None = None,
        client: ChatClient | None = None,
        pool: EvaluationPool | None = None,
    ):
        """``client`` replaces the model endpoint of llm runs (tests, benchmarks with a scripted model);
        ``pool`` the evaluation pool ``cluster`` names (benchmarks with simulated devices; the caller closes it)."""
        self.client = client
        self.pool = pool
        self.memory = memory
        self.store = memory.store
        self.out_root = out_root
        self.observer = observer or Observer()

    def start(self, specs: list[TaskSpec], config: OptimizeConfig, out_dir: Path | None = None) -> RunResult:
        """A new run over ``specs``; returns what its run.json holds."""
        get_platform(config.platform)  # one clear line, before tasks load, when this machine lacks it
        check_replay(config, self.observer.note)  # a replay's prompts are its recording's, before anything runs
        tasks = order_tasks([load_task(Path(s.path), s.overrides) for s in specs])
        if config.start_file and len(tasks) > 1:
            raise UserError(f"--start FILE starts one task; this run has {len(tasks)}")
        starts = {task_id_of(t): starting_code(t, config) for t in tasks}  # refuses, before the run exists
        run = Run(config=config.model_dump(mode="json"))
        out = out_dir or self.out_root / run.id
        run = run.model_copy(
            update={
                "state": RunState(
                    status="running",
                    out=str(out.resolve()),
                    tasks=[RunTask(path=str(t.path), overrides=t.overrides, id=task_id_of(t)) for t in tasks],
                )
            }
        )
        pool = self._pool(config, None)  # refuses before the run exists
        try:
            with self.store.write() as conn:
                self.store.runs.add(conn, run)
        except BaseException:
            self._close(pool)
            raise
        return self._execute(run, tasks, config, starts, pool)

    def resume(self, run_id: str, cluster: str | None = None) -> RunResult:
        """Continue ``run_id`` where it stopped; ``cluster``: another address of its cluster (--cluster)."""
        with self.store.read() as conn:
            run = self.store.runs.get(conn, run_id)
        if run is None or not run.state.tasks:
            raise UserError(f"no optimizer run {run_id!r} in {self.store.url}")
        if run.state.status == "done":
            raise UserError(f"run {run_id} is already finished; its results are in {run.state.out}")
        config = OptimizeConfig.stored(run.config)
        get_platform(config.platform)  # a resumed run may land on a machine without its device
        check_replay(config, self.observer.note)
        if cluster is not None:  # the cluster's head may have moved since the run began
            config = config.model_copy(update={"cluster": config.cluster.model_copy(update={"address": cluster})})
        tasks = [load_task(Path(t.path), t.overrides) for t in run.state.tasks]
        starts = {task_id_of(t): starting_code(t, config) for t in tasks}
        return self._execute(run, tasks, config, starts, self._pool(config, run.state.device))

    # -- the run -----------------------------------------------------------------------
    def _pool(self, config: OptimizeConfig, device_kind: str | None) -> EvaluationPool:
        if self.pool is not None:
            return self.pool
        key = config.policy.key_env()
        return open_pool(
            config.cluster, config.platform, self.store.url, device_kind, [key] if key else [], self.observer.note
        )

    def _close(self, pool: EvaluationPool) -> None:
        if pool is not self.pool:  # the caller's own stays open
            pool.close()

    def _execute(
        self,
        run: Run,
        tasks: list[Task],
        config: OptimizeConfig,
        starts: dict[str, tuple[str, str]],
        pool: EvaluationPool,
    ) -> RunResult:
        try:
            return self._execute_on(pool, run, tasks, config, starts)
        finally:
            self._close(pool)

    def _execute_on(
        self,
        pool: EvaluationPool,
        run: Run,
        tasks: list[Task],
        config: OptimizeConfig,
        starts: dict[str, tuple[str, str]],
    ) -> RunResult:
        starts = measured_starts(pool, tasks, starts)
        self.memory = self.memory.configured(config.memory)
        control = RunControl(
            config, deadline=time.monotonic() + config.max_wall_s if config.max_wall_s else None, pool=pool
        )
        ledger = UnconfirmedLedger(run.state.unconfirmed)
        book = _Book(self, run if pool.device_kind is None else self._save_state(run, device=pool.device_kind), ledger)
        stored = self._attempts(run.id)
        control.tokens = sum(a.tokens_in + a.tokens_out for a in stored) + sum(
            n.prompt_tokens + n.completion_tokens for n in run.state.no_candidate.values()
        )
        # One per run: its llm agents share one reply protocol; a recording keeps the run's settings;
        # each agent's model client tells of its long waits, and of requests it gave up on a timeout.
        policies = RunPolicies(
            config.policy,
            config.context,
            self.client,
            config.model_dump(mode="json"),
            waits=lambda task_id, agent: AgentWaits(self.observer, ledger, task_id, agent),
        )
        todo = [t for t in tasks if task_id_of(t) not in run.state.finished]

        def start(task: Task) -> TaskRunner:
            task_id = task_id_of(task)
            runner = self._runner(
                task, book.run, config, control, policies, [a for a in stored if a.task_id == task_id], *starts[task_id]
            )
            book.started(task_id, runner)
            self.observer.seeded(task_id, starts[task_id][1])
            self.observer.task_started(task_id, config.budget, runner.state.used, [a.name for a in runner.agents])
            return runner

        def end(runner: TaskRunner, confirmation: Confirmation | None) -> None:
            book.finished(runner.state.task_id, confirmation, runner, control)
            self.observer.task_finished(runner.state.task_id, runner.state.incumbent)

        try:
            Search(control, self.observer, start, end).run(todo)
            status: RunStatus = "stopped" if control.stop.is_set() else "done"  # stopped: a token or time budget
        except KeyboardInterrupt:
            run = book.save("interrupted")
            raise Interrupted(self._outputs(run)) from None
        except BaseException:
            if book.run.state.status == "running":
                book.save("failed")
            raise
        return self._outputs(book.save(status, final=True))

    def _runner(
        self,
        task: Task,
        run: Run,
        config: OptimizeConfig,
        control: RunControl,
        policies: RunPolicies,
        stored: list[Attempt],
        start_code: str,
        origin: str,
    ) -> TaskRunner:
        task_id = task_id_of(task)
        state = TaskState(task_id=task_id, budget=config.budget)
        agents = [
            AgentState(name=f"a{i + 1}", lens=lens, code=start_code, policy=policies.make(f"a{i + 1}", task_id))
            for i, lens in enumerate(assign_lenses(task.op_family, config.agents))
        ]
        with control.memory_lock.exclusive():  # tasks of a cluster run start while others' agents write
            self._replay(run.id, task_id, state, agents, stored, config)
        return TaskRunner(
            task, state, agents, self.memory, control, run.id, self.observer, start_code, generated=origin == GENERATED
        )

    def _replay(
        self,
        run_id: str,
        task_id: str,
        state: TaskState,
        agents: list[AgentState],
        stored: list[Attempt],
        config: OptimizeConfig,
    ) -> None:
        """Bring states, policies and memory's open stages to where the stored attempts left them."""
        by_name = {a.name: a for a in agents}
        with self.store.read() as conn:
            adoptions = {a.id: self.store.adoptions.for_attempt(conn, a.id) for a in stored}
            ended = self.store.stages.for_run(conn, run_id, task_id)
        for attempt in stored:
            agent = by_name.get(attempt.agent)
            if agent is None:
                raise UserError(f"run has attempts by agent {attempt.agent!r}, which this configuration lacks")
            state.used += 1
            state.evaluated.add(attempt.case.code_hash)
            if attempt.verdict == "KEEP":
                state.incumbent = attempt
            advance(agent, attempt, config.r_draft)
            agent.policy.observe(attempt)
        self.memory.callbacks.replay([(a, adoptions[a.id]) for a in stored], ended)

    # -- persistence ---------------------------------------------------------------------
    def _attempts(self, run_id: str) -> list[Attempt]:
        with self.store.read() as conn:
            return self.store.attempts.for_run(conn, run_id)

    def _save_state(self, run: Run, **update: Any) -> Run:
        run = run.model_copy(update={"state": run.state.model_copy(update=update)})
        with self.store.write() as conn:
            self.store.runs.update(conn, run)
        return run

    def _save(
        self,
        run: Run,
        *,
        status: RunStatus,
        finished: list[str],
        confirmed: dict[str, Confirmation | None] | None = None,
        no_candidate: dict[str, NoCandidate] | None = None,
        ended_at: float | None = None,
        unconfirmed: dict[str, Unconfirmed] | None = None,
    ) -> Run:
        update: dict[str, Any] = {"status": status, "finished": list(finished)}
        if unconfirmed is not None:
            update["unconfirmed"] = unconfirmed
        if ended_at is not None:
            update["ended_at"] = ended_at
        if confirmed is not None:
            update["confirmed"] = dict(confirmed)
        if no_candidate is not None:
            update["no_candidate"] = no_candidate
        return self._save_state(run, **update)

    def _outputs(self, run: Run) -> RunResult:
        attempts = self._attempts(run.id)
        by_task: dict[str, list[Attempt]] = {t.id: [] for t in run.state.tasks}
        for attempt in attempts:
            by_task.setdefault(attempt.task_id, []).append(attempt)
        if run.state.out is None:
            raise UserError(f"run {run.id} has no output folder on record")
        return write_outputs(
            Path(run.state.out),
            run.id,
            run.state.status,
            by_task,
            run.state.confirmed,
            run.state.no_candidate,
            model_written=OptimizeConfig.stored(run.config).policy.model_written,
            unconfirmed=run.state.unconfirmed,
            started_at=run.created_at,
            ended_at=run.state.ended_at,
        )


class _Book:
    """The run's record as its tasks finish, which on a cluster they may do at once."""

    def __init__(self, optimizer: Optimizer, run: Run, ledger: UnconfirmedLedger):
        self.optimizer, self.run, self.ledger = optimizer, run, ledger
        self.active: dict[str, TaskRunner] = {}  # tasks started and not finished
        self.lock = threading.Lock()

    def started(self, task_id: str, runner: TaskRunner) -> None:
        with self.lock:
            self.active[task_id] = runner

    def finished(
        self, task_id: str, confirmation: Confirmation | None, runner: TaskRunner, control: RunControl
    ) -> None:
        with self.lock:
            state = self.run.state
            self.run = self.optimizer._save(
                self.run,
                status="running",
                finished=[*state.finished, task_id],
                confirmed={**state.confirmed, task_id: confirmation},
                no_candidate=_no_candidate(self.run, runner, control),
                unconfirmed=self.ledger.snapshot(),
            )
            self.active.pop(task_id, None)  # its work is saved

    def save(self, status: RunStatus, final: bool = False) -> Run:
        """The run saved with ``status``; unless ``final``, with the turns of unfinished tasks that gave nothing."""
        with self.lock:
            no_candidate = None
            if not final:
                run = self.run
                for runner in self.active.values():
                    run = run.model_copy(
                        update={"state": run.state.model_copy(update={"no_candidate": _no_candidate(run, runner)})}
                    )
                no_candidate = run.state.no_candidate
            self.run = self.optimizer._save(
                self.run,
                status=status,
                finished=self.run.state.finished,
                no_candidate=no_candidate,
                ended_at=time.time(),
                unconfirmed=self.ledger.snapshot(),
            )
            return self.run


def _no_candidate(run: Run, runner: TaskRunner | None, control: RunControl | None = None) -> dict[str, NoCandidate]:
    """The run's record of turns without a candidate, with those of ``runner``'s task added.

    A task that ends (``control`` given) without a candidate of its policy always has an entry saying
    why its agents stopped: a model's evaluated seed is no candidate of the model's.
    """
    recorded = dict(run.state.no_candidate)
    if runner is None:
        return recorded
    task_id = runner.state.task_id
    now = runner.no_candidate()
    if now is not None:
        recorded[task_id] = recorded[task_id].plus(now) if task_id in recorded else now
    if control is None:
        return recorded
    model = control.config.policy.model_written
    attempts = [a for agent in runner.agents for a in agent.history]
    if got_candidate(attempts, model) or (task_id in recorded and recorded[task_id].stops):
        return recorded
    if control.stop.is_set():
        why = f"the run's token or time budget ran out before {'the model gave a' if model else 'any'} candidate"
    elif attempts and runner.state.used >= runner.state.budget:
        budget = runner.state.budget
        why = f"the task's budget of {budget} evaluation{'s' if budget != 1 else ''} went to the seed"
    else:
        why = "no agent proposed a candidate"
    recorded[task_id] = (recorded.get(task_id) or NoCandidate()).plus(NoCandidate(stops=[why]))
    return recorded
