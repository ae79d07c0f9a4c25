"""One task of a run: its agents' shared state, what each agent sees, and what a verdict changes.

The search loop (``search.py``) drives it: ``turn_for`` builds an agent's next Turn,
``begin`` takes its proposal to an ``EvaluationInput`` (or says why there is nothing to
judge), ``judged`` records the verdict. After each verdict one typed record
(``AttemptResult``) goes through the task's callbacks: memory's stores the attempt and all
it teaches in one transaction before the agent's next turn, so an interrupted run loses
only evaluations that were still in flight; progress output is the next callback.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass, field

from kernelkiln.evaluation.local_pool import LocalPool
from kernelkiln.evaluation.pool import EvaluationInput, EvaluationPool, PoolJudge
from kernelkiln.guard import diagnose
from kernelkiln.guard.verdict import Verdict
from kernelkiln.memory import distill
from kernelkiln.memory.callbacks import AttemptResult, VerdictCallback
from kernelkiln.memory.memory import Memory
from kernelkiln.memory.signature import signature
from kernelkiln.orchestrator.agent import AgentState, TaskState, advance, claim, leaderboard, settle
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.interrupts import interrupts_deferred
from kernelkiln.orchestrator.observer import Observer
from kernelkiln.platforms import machine_kind
from kernelkiln.platforms.host import fit_threads
from kernelkiln.policy.turn import GaveUp, Proposal, Turn, code_hash
from kernelkiln.rwlock import ReadWriteLock
from kernelkiln.stats import geomean
from kernelkiln.store.records import Adoption, Attempt, Measurement, NoCandidate, TaskRecord, latest_last, new_id
from kernelkiln.task import Task
from kernelkiln.task import knobs as K

_DIAGNOSTICS_KEPT = 20
_MAX_REPEATS = 3  # proposals in a row of code the run already evaluated, before an agent is stopped


@dataclass
class RunControl:
    """What every task of a run shares: the stop flag, the token and wall budgets, the pool, the errors."""

    config: OptimizeConfig
    deadline: float | None = None  # time.monotonic() value
    tokens: int = 0
    stop: threading.Event = field(default_factory=threading.Event)  # finish in-flight work, start no more
    lock: threading.Lock = field(default_factory=threading.Lock)
    memory_lock: ReadWriteLock = field(default_factory=ReadWriteLock)  # agents read shared, verdicts write alone
    pool: EvaluationPool = field(default_factory=LocalPool)  # where candidates are judged
    errors: list[BaseException] = field(default_factory=list)  # what stopped the run, first first

    def spend(self, prompt: int, completion: int) -> None:
        with self.lock:
            self.tokens += prompt + completion
            if self.config.max_tokens is not None and self.tokens >= self.config.max_tokens:
                self.stop.set()

    def fail(self, error: BaseException) -> None:
        """A turn failed: the run starts no more work and raises ``error`` once in-flight work is done."""
        with self.lock:
            self.errors.append(error)
        self.stop.set()

    def may_start(self) -> bool:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.stop.set()
        return not self.stop.is_set()


def task_id_of(task: Task) -> str:
    """The task's id in memory: its name, plus its overrides when it has any (``Task.id``)."""
    return task.id


@dataclass(frozen=True)
class Judging:
    """A proposal on its way to the guard: what its verdict will be recorded with."""

    agent: AgentState
    turn: Turn
    proposal: Proposal
    attempt_id: str
    adoptions: list[Adoption]
    judged_against: Attempt | None  # the incumbent when it was submitted (settle re-checks a KEEP)
    item: EvaluationInput


class TaskRunner:
    """The agents of one task, their shared state and what their verdicts change."""

    def __init__(
        self,
        task: Task,
        state: TaskState,
        agents: list[AgentState],
        memory: Memory,
        control: RunControl,
        run_id: str,
        observer: Observer,
        start_code: str = "",
        generated: bool = False,
    ):
        """``seed_code``: what the agents start from (``generated``: by ``kiln lower`` from the reference)."""
        self.task, self.state, self.agents, self.start_code = task, state, agents, start_code
        self.memory, self.control, self.run_id, self.observer = memory, control, run_id, observer
        self.config = control.config
        self.judgeable = control.pool.judgeable(task)  # a replay judges its measured configurations only
        self.record = TaskRecord(
            id=state.task_id,
            op_family=task.op_family,
            platform=self.config.platform,
            meta={"path": str(task.path), "overrides": task.overrides, "level": task.level},
        )
        machine = control.pool.device_kind or machine_kind(
            self.config.platform, fit_threads(self.config.guard.threads)[0]
        )
        self.signature = signature(
            task, state.task_id, start_code, generated=generated, platform=self.config.platform, machine=machine
        )
        with control.memory_lock.shared():
            self.prior = memory.prior(self.signature, run_id)
        if generated and memory.config.transfer.start_first == "generated":
            self.prior = dataclasses.replace(self.prior, start_first=True)
        for note in self.prior.notes:
            observer.note(f"{state.task_id}: {note}")
        # Memory first: what the progress line reports is already stored.
        self.callbacks: list[VerdictCallback] = [memory.callbacks, observer]

    # -- a turn ------------------------------------------------------------------------
    def begin(self, agent: AgentState, turn: Turn, proposal: Proposal | GaveUp | None) -> Judging | None:
        """What to judge of ``agent``'s proposal; None when it gave none (or known code) and the turn ends.

        A turn without a candidate (GaveUp) lets the agent try again, up to the policy's
        ``turns_without_candidate()`` in a row; then the agent stops, and the task's record says why.
        """
        if proposal is None:
            agent.exhausted = True
            return None
        self.control.spend(proposal.prompt_tokens, proposal.completion_tokens)  # counted, candidate or not
        if isinstance(proposal, GaveUp):
            agent.fruitless += 1
            limit = self.config.policy.turns_without_candidate()
            agent.exhausted = agent.fruitless >= limit
            in_a_row = "1 turn" if limit == 1 else f"{limit} turns in a row"
            self._gave_up(proposal, f"{agent.name} stopped after {in_a_row} without a candidate", agent.exhausted)
            return None
        if not claim(self.state, proposal.code):
            # Another agent evaluates (or evaluated) the same code. A policy that keeps proposing
            # known code (a model that repeats itself) is stopped rather than asked forever.
            agent.repeats += 1
            agent.exhausted = agent.repeats >= _MAX_REPEATS
            stop = f"{agent.name} stopped after {_MAX_REPEATS} proposals in a row of code already evaluated"
            repeated = GaveUp(
                reason="the model proposed code this run had already evaluated",
                prompt_tokens=proposal.prompt_tokens,
                completion_tokens=proposal.completion_tokens,
                cost_usd=proposal.cost_usd,
                calls=tuple(proposal.case.calls),
            )
            self._gave_up(repeated if proposal.case.calls else None, stop, agent.exhausted)
            return None
        agent.repeats = agent.fruitless = 0
        attempt_id = new_id("a")
        adoptions = [
            Adoption(
                attempt_id=attempt_id,
                experience_id=c.experience_id,
                task_id=self.state.task_id,
                adopted=c.adopted,
                why=c.why,
            )
            for c in proposal.choices
        ]
        judged_against = self.state.incumbent
        self.observer.evaluating(self.state.task_id, agent.name, proposal.summary)
        item = EvaluationInput(
            self.task, self.config.guard, proposal.code, judged_against.code if judged_against else None
        )
        return Judging(agent, turn, proposal, attempt_id, adoptions, judged_against, item)

    def _gave_up(self, turn: GaveUp | None, stop: str, stopped: bool) -> None:
        """Record a turn that gave no candidate (None: it made no model call), and ``stop`` if the agent stopped."""
        with self.state.lock:
            if turn is not None:
                self.state.gave_up.append(turn)
            if stopped:
                self.state.stops.append(stop)

    def judged(self, judging: Judging, verdict: Verdict) -> None:
        """Record the verdict: settle it against the incumbent, run the callbacks, move the agent."""
        agent = judging.agent
        attempt = self._attempt(judging.attempt_id, agent, judging.turn, judging.proposal, verdict)
        attempt = settle(attempt, self.state, judging.judged_against)
        result = AttemptResult(
            attempt=attempt,
            task=self.record,
            adoptions=judging.adoptions,
            parent=self._parent(attempt),
            incumbent=self.state.incumbent,
            signature=self.signature,
        )
        with self.control.memory_lock.exclusive(), interrupts_deferred():
            for callback in self.callbacks:
                callback.after_verdict(result)
        advance(agent, attempt, self.config.r_draft)
        agent.verdict = verdict
        agent.policy.observe(attempt)

    def _parent(self, attempt: Attempt) -> Attempt | None:
        """The attempt ``attempt`` derived from, when an agent of this run holds it (else memory reads it)."""
        if attempt.parent_id is None:
            return None
        return next((a for agent in self.agents for a in agent.history if a.id == attempt.parent_id), None)

    # -- what an agent sees ------------------------------------------------------------
    def turn_for(self, agent: AgentState) -> Turn:
        """The agent's next Turn: its branch, its latest feedback, and what memory retrieves for it."""
        cfg, shown, objective = self.config, self.config.context, agent.objective()
        try:
            names = [k.name for k in K.read_knobs(agent.code)] if agent.code else []
        except K.KnobError:
            names = []
        query = " ".join([self.task.name, self.task.op_family or "", cfg.platform, agent.lens.name, objective, *names])
        layered = agent.policy.layered  # the tuner reads no prompt: it is spared the layers' queries
        shared = cfg.memory.board.shared
        others = [a for a in self.agents if a is not agent]
        with self.control.memory_lock.shared():
            experiences = (
                self.memory.retrieve(query, platform=cfg.platform, limit=shown.max_experiences)
                if shown.max_experiences
                else []
            )
            graph = (
                self.memory.ranked_attempts(self.state.task_id, shown.max_graph_attempts)
                if shown.max_graph_attempts and layered
                else []
            )
            board = self.memory.board.read(self.state.task_id) if layered else []
            resident = self.memory.resident_rules()
            knowledge = (
                self.memory.knowledge(query, cfg.platform, limit=shown.max_knowledge)
                if shown.max_knowledge and layered
                else []
            )
        if not shared:  # each agent sees only its own conclusions on this task
            theirs = {a.id for other in others for a in other.history}
            experiences = [e for e in experiences if e.experience.source_attempt_id not in theirs]
            graph = [a for a in graph if a.agent == agent.name]
            board = [e for e in board if e.agent == agent.name]
        with self.state.lock:
            best = self.state.incumbent.speedup if self.state.incumbent is not None else None
            evaluated = frozenset(self.state.evaluated)
        return Turn(
            task=self.task,
            platform=cfg.platform,
            agent=agent.name,
            lens=agent.lens,
            objective=objective,
            turn=len(agent.history) + 1,
            code=agent.code,
            parent_id=agent.parent_id,
            best_speedup=best,
            feedback=agent.history[-1] if agent.history else None,
            verdict=agent.verdict,
            history=tuple(agent.history),
            experiences=tuple(experiences),
            graph=tuple(graph),
            board=tuple(board),
            rules=tuple(r for r, _ in resident),
            rule_sources=tuple(e for _, e in resident),
            knowledge=tuple(knowledge),
            leaderboard=leaderboard(self.agents, agent) if objective == "draft" and shared else (),
            peers=tuple(a for other in others for a in other.history) if shared else (),
            evaluated=evaluated,
            prior=self.prior,
            origin=self.start_code,
            judgeable=self.judgeable,
            diagnose=diagnose.diagnoser(
                PoolJudge(self.control.pool, self.task, cfg.guard), profile_budget_s=cfg.guard.time_budget_s / 4
            ),
        )

    # -- the record of a judged candidate --------------------------------------------------
    def _attempt(self, attempt_id: str, agent: AgentState, turn: Turn, proposal: Proposal, verdict: Verdict) -> Attempt:
        case = proposal.case.model_copy(
            update={
                "objective": turn.objective,
                "code_hash": code_hash(proposal.code),
                "stage": verdict.stage,
                "reason": verdict.reason,
                "noise_margin": verdict.noise_margin,
                "speedup_vs_incumbent": verdict.speedup_vs_incumbent,
                "diagnostics": verdict.diagnostics[:_DIAGNOSTICS_KEPT],
                "cost_usd": proposal.cost_usd,
                "device": verdict.device,
                "signature": self.signature.exact,
            }
        )
        measurements = [
            Measurement(
                workload=w.name,
                t_ref_ms=w.t_ref_s * 1e3,
                t_cand_ms=w.t_cand_s * 1e3,
                speedup=w.speedup,
                sol_fraction=w.sol_fraction,
            )
            for w in verdict.workloads
        ]
        time_ms = geomean(w.t_cand_s * 1e3 for w in verdict.workloads)
        journal = f"{proposal.journal.rstrip()}\n\n## Verdict\n{verdict.verdict} at {verdict.stage}: {verdict.reason}\n"
        return Attempt(
            id=attempt_id,
            task_id=self.state.task_id,
            run_id=self.run_id,
            parent_id=proposal.parent_id,
            agent=agent.name,
            lens=agent.lens.name,
            summary=proposal.summary,
            journal=journal,
            case=case,
            code=proposal.code,
            verdict=verdict.verdict,
            error_class=verdict.stage if not verdict.correct else None,
            time_ms=time_ms,
            speedup=verdict.speedup if verdict.correct else None,
            measurements=measurements,
            tokens_in=proposal.prompt_tokens,
            tokens_out=proposal.completion_tokens,
        )

    def no_candidate(self) -> NoCandidate | None:
        """The turns whose model calls gave no candidate, with their cost and reasons, and why agents stopped."""
        with self.state.lock:
            gave_up, stops = list(self.state.gave_up), list(self.state.stops)
        if not gave_up and not stops:
            return None
        return NoCandidate(
            turns=len(gave_up),
            prompt_tokens=sum(g.prompt_tokens for g in gave_up),
            completion_tokens=sum(g.completion_tokens for g in gave_up),
            cost_usd=sum(g.cost_usd for g in gave_up),
            reasons=latest_last([g.reason for g in gave_up]),
            stops=list(dict.fromkeys(stops)),
        )

    # -- the end of the task -------------------------------------------------------------
    def finish(self) -> None:
        """Close the agents' stages and store the task's best configuration, in one transaction."""
        best = self.state.incumbent
        correct = [a for agent in self.agents for a in agent.history if a.correct]
        first = min(correct, key=lambda a: a.created_at) if correct else None
        lesson = (
            distill.best_configuration(best, first, self.task.op_family, self.config.platform)
            if best is not None
            else None
        )
        with self.control.memory_lock.exclusive(), interrupts_deferred():
            self.memory.callbacks.on_task_end(self.state.task_id, [a.name for a in self.agents], lesson)
