"""The guard: gate -> build -> check -> time -> verdict, for one task."""

from __future__ import annotations

import functools
import secrets
import time
import weakref
from collections.abc import Callable
from typing import Any

from kernelkiln import native
from kernelkiln.errors import UserError
from kernelkiln.guard import gate
from kernelkiln.guard.check_stage import check_worker
from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.correctness.check import WorkloadCases, make_cases, summarize
from kernelkiln.guard.measurement import clocks, contention, placement
from kernelkiln.guard.measurement.device import DeviceLock
from kernelkiln.guard.measurement.scoring import (
    decide,
    noise_margin,
    replicate_settled,
    replicated,
    workload_result,
    worth_replicating,
)
from kernelkiln.guard.measurement.timing import Series, Timer, TimingReject
from kernelkiln.guard.reference_ops import forbidden_ops, reference_models
from kernelkiln.guard.rejection import Reject, raised
from kernelkiln.guard.verdict import Isolation, Stage, TimingSetup, Verdict, WorkloadResult
from kernelkiln.guard.worker import lanes, sandbox
from kernelkiln.guard.worker.builds import CandidateBuilds
from kernelkiln.guard.worker.workers import Worker, WorkerFailure
from kernelkiln.platforms import get_platform
from kernelkiln.platforms.host import fit_threads
from kernelkiln.task import Task

_SLOT_REF, _SLOT_CAND, _SLOT_INC, _SLOT_BUILD = 0, 1, 2, 3  # within a lane (worker/lanes.py)
INTERPRETED = "correct under Triton's interpreter (TRITON_INTERPRET=1); no timing is possible without a GPU"


class GuardSession:
    """Evaluates candidates for one task; keeps the reference worker warm between them."""

    def __init__(
        self,
        task: Task,
        config: GuardConfig | None = None,
        device: DeviceLock | None = None,
        observe: Callable[[str, Series], None] | None = None,
    ):
        """``device`` is shared by the sessions that time on the same device (default: a private one);
        ``observe`` is called with each workload's name and its timing rounds after it is timed."""
        self.task = task
        self.config = config or GuardConfig()
        self.platform = get_platform(self.config.platform)  # a one-line UserError when this machine lacks it
        self.model_seed = secrets.randbits(31)
        self.ref_models, recorded = reference_models(task, self.model_seed)  # before the clocks lock: it may fail
        self._clocks = self.config.lock_clocks_mhz
        if self._clocks is not None:
            clocks.lock(self.platform, self._clocks)
        self.device = device or DeviceLock()
        self.threads, clamped = fit_threads(self.config.threads)
        self.notes = [clamped] if clamped else []  # said in every timed verdict's timing setup
        self._contention_probed = False
        self.placement = placement.plan(self.threads)
        self.observe = observe
        self.peaks = self.platform.peaks(self.threads)  # for speed-of-light bounds
        self.forbidden = (
            forbidden_ops(recorded, task.forbidden_ops, task.allowed_ops)
            if self.config.forbid_reference_ops
            else frozenset()
        )
        self._ref: Worker | None = None
        self._live: weakref.WeakSet[Worker] = weakref.WeakSet()  # every worker not yet collected
        self._lane: int | None = lanes.take()
        self._build_uid = (
            sandbox.allocate_uid(self._slot(_SLOT_BUILD))
            if (self.config.isolate_user and sandbox.can_switch_user())
            else None
        )
        self.required = sandbox.required_layers(self.config)  # [] when best-effort
        self.builds = CandidateBuilds(self.config, self.required, self._build_uid)

    # -- workers -----------------------------------------------------------------------
    def _slot(self, role: int) -> int:
        if self._lane is None:  # used again after close()
            self._lane = lanes.take()
        return self._lane * lanes.SLOTS_PER_SESSION + role

    def _spawn(
        self,
        slot: int,
        source: str | None,
        diagnostics: list[dict[str, Any]],
        on_build: Callable[[native.BuildRequest], None] | None = None,
        into: list[Worker] | None = None,
        threads: int | None = None,
    ) -> Worker:
        """A worker loaded with ``source`` (None: the reference) at ``threads`` (None: the session's);
        appended to ``into`` once it runs."""
        worker = Worker(
            self._slot(slot),
            str(self.task.path),
            self.task.overrides,
            self.model_seed,
            self.config,
            threads or self.threads,
            self.placement.worker_cores,
        )
        self._live.add(worker)
        try:
            sandbox.refuse_unless_held(self.required, worker.isolation, worker.isolation_notes, "a worker")
        except UserError:
            worker.close()
            raise
        if into is not None:
            into.append(worker)
        serve = self.builds.server(worker, source, diagnostics, on_build)
        try:
            reply = worker.request({"op": "build", "source": source}, self.config.build_timeout_s, serve=serve)
        except BaseException:
            worker.close()
            raise
        if not reply.get("ok"):
            worker.close()
            raise Reject("build", raised(reply), diagnostics)
        return worker

    def _reference(self) -> Worker:
        if self._ref is not None and self._ref.exited():
            self._ref.close()
            self._ref = None
        if self._ref is None:
            try:
                self._ref = self._spawn(_SLOT_REF, None, [])
            except (Reject, WorkerFailure) as exc:
                raise UserError(f"{self.task.path}: the reference does not run in a worker: {exc}") from None
        return self._ref

    # -- stages ------------------------------------------------------------------------
    def _cases(self) -> list[WorkloadCases]:
        """Per workload: fresh seeds (the task's inputs, then robustness trials), and the parent's expected results."""
        robustness = self.config.robustness_trials
        return [
            make_cases(self.task, self.ref_models[index], index, self.config.check_trials, robustness)
            for index in range(len(self.task.workloads))
        ]

    def _check(self, worker: Worker, cases: list[WorkloadCases]) -> bool:
        return check_worker(self.task, worker, cases, self.forbidden, self.config.call_timeout_s)

    def _time(
        self, workers: dict[str, Worker], budget_s: float, replicate: bool = False
    ) -> tuple[list[WorkloadResult], float, TimingSetup, str]:
        """Per-workload results, the noise band, how it was timed, and why it could not be (``""``: it could);
        a ``replicate`` stops where its early look settles it (``replicate_settled``)."""
        look = functools.partial(replicate_settled, config=self.config) if replicate else None
        with placement.pinned(self.placement.guard_cores):
            timer = Timer(self.task, self.ref_models, workers, self.config, self.platform, self.threads, look)
            results, timed, blind = [], [], ""
            for index, workload in enumerate(self.task.workloads):
                series = timer.run(index, budget_s / len(self.task.workloads))
                if self.observe is not None:
                    self.observe(workload.name, series)
                if series.blind:
                    blind = f"workload {workload.name}: {series.blind}"
                    break
                results.append(workload_result(workload, series, self.peaks))
                timed.append(series)
        setup = TimingSetup(
            placement=self.placement,
            accounting=timer.accounted,
            request_s=timer.cost.wall_s,
            request_jitter_s=timer.cost.jitter_s,
            batch_target_s=timer.batch_target_s,
            threads=self.threads,
            notes=list(self.notes),
        )
        return results, noise_margin(timed, self.config) if timed else 0.0, setup, blind

    def _probe_contention(self) -> None:
        """Once per session: a contended reference (``contention``) makes the session time at one thread."""
        self._contention_probed = True
        ref = self._reference()
        one = self._spawn(_SLOT_CAND, None, [], threads=1)
        try:
            why = contention.probe(
                self.task,
                self.ref_models,
                ref,
                one,
                self.config,
                self.platform,
                self.threads,
                self.placement.guard_cores,
            )
        finally:
            one.close()
        if why:
            self.notes.append(why)
            self.threads, self.placement, self.peaks = 1, placement.plan(1), self.platform.peaks(1)
            ref.close()
            self._ref = None

    def _watch(self, cand: Worker, stage: Stage) -> None:
        """Reject a candidate that left processes behind or computes while it should be idle."""
        problem = cand.background_work(self.config.idle_probe_s, self.config.idle_cpu_max)
        if problem:
            raise Reject(stage, problem)

    # -- the cascade -------------------------------------------------------------------
    def native_requests(self, source: str) -> list[native.BuildRequest]:
        """The native builds ``source`` asks for when loaded (after the gate; [] when it fails to load)."""
        if gate.check(source, self.forbidden, self.config.platform):
            return []
        requests: list[native.BuildRequest] = []
        try:
            with self.device.shared():
                self._spawn(_SLOT_CAND, source, [], on_build=requests.append).close()
        except (Reject, WorkerFailure):
            pass
        return requests

    def build_as_sandbox(self, request: native.BuildRequest) -> native.BuildResult:
        """Compile ``request`` the way candidate builds are compiled (confined, as the sandbox build user)."""
        with self.device.shared():
            return self.builds.build(request)

    def evaluate(
        self, source: str, incumbent: str | None = None, *, timed: bool = True, time_budget_s: float | None = None
    ) -> Verdict:
        """Judge ``source`` against the reference (and ``incumbent`` when given).

        ``timed=False`` stops after the checks (a correct candidate is ACCEPT at stage
        "check", untimed); ``time_budget_s`` overrides the configured timing budget. A
        candidate that ran Triton kernels under Triton's interpreter (no GPU) is never timed:
        correct, it is ACCEPT at stage "check" with ``timed=False`` and no speedup. Once
        checked, the verdict's ``check`` says against what and on how many trials. A KEEP or REVERT
        near no difference is timed again in fresh processes and stands only where both figures agree
        (``replicate``, ``replicate_within``, ``replicate_rounds``).
        """
        checked: list[WorkloadCases] = []
        spawned: list[Worker] = []
        verdict = self._judge(source, incumbent, timed, time_budget_s, checked, spawned)
        if worth_replicating(verdict, self.config):
            if incumbent is None and self._ref is not None:  # judged against the reference: a fresh one too
                self._ref.close()
                self._ref = None
            verdict = replicated(verdict, self._judge(source, incumbent, timed, time_budget_s, [], [], replicate=True))
        update: dict[str, Any] = {"check": summarize(self.task, checked)} if checked else {}
        isolation = (
            spawned[0].isolation_record(self.config.isolation) if spawned else Isolation(policy=self.config.isolation)
        )
        update["isolation"] = isolation
        if isolation.denied and verdict.verdict == "REJECT":
            update["reason"] = f"{verdict.reason} (the sandbox refused it: {', '.join(isolation.denied)})"
        return verdict.model_copy(update=update)

    def _judge(
        self,
        source: str,
        incumbent: str | None,
        timed: bool,
        time_budget_s: float | None,
        checked: list[WorkloadCases],
        spawned: list[Worker],
        replicate: bool = False,
    ) -> Verdict:
        """``evaluate``'s cascade; fills ``checked`` with the check's cases once they exist, and
        ``spawned`` with the candidate's worker once it runs. A ``replicate`` of a judgement that passed
        the check runs no check (nor its idle probe) and times ``replicate_rounds`` rounds."""
        start = time.perf_counter()
        issues = gate.check(source, self.forbidden, self.config.platform)
        if issues:
            return Verdict.reject(
                "gate",
                f"line {issues[0].line}: {issues[0].message}",
                diagnostics=[i.to_dict() for i in issues],
                seconds=time.perf_counter() - start,
            )
        inc_issues = gate.check(incumbent, self.forbidden, self.config.platform) if incumbent is not None else []
        if inc_issues:
            raise UserError(f"the incumbent fails the gate: line {inc_issues[0].line}: {inc_issues[0].message}")
        workers: dict[str, Worker] = {}  # in timing order of creation: ref, [inc], cand
        diagnostics: list[dict[str, Any]] = []
        stage: Stage = "build"
        cand: Worker | None = None
        note = ""
        try:
            if timed and self.threads > 1 and self.platform.device == "cpu" and not self._contention_probed:
                with self.device.exclusive():
                    self._probe_contention()
            with self.device.shared():
                workers["ref"] = self._reference()
                cand = self._spawn(_SLOT_CAND, source, diagnostics, into=spawned)
                stage = "check"
                interpreted = False
                if not replicate:  # a replicate's source and incumbent passed this check in the first judgement
                    cases = self._cases()
                    checked.extend(cases)
                    interpreted = self._check(cand, cases)
                    self._watch(cand, "check")
                if incumbent is not None and not interpreted:
                    stage = "build"
                    workers["inc"] = self._spawn(_SLOT_INC, incumbent, [])
                    # The same checks on the same inputs: it re-verifies the incumbent, and leaves both
                    # processes with the same allocation history, so identical code times identically.
                    try:
                        untimeable_incumbent = not replicate and self._check(workers["inc"], cases)
                    except Reject as exc:
                        raise UserError(f"the incumbent fails its check: {exc.reason}") from None
                    if untimeable_incumbent:  # only its correctness is known: judge against the reference
                        workers.pop("inc").close()
                        incumbent = None
                        note = " (the incumbent runs under Triton's interpreter, untimed: judged against the reference)"
            workers["cand"] = cand
            if interpreted:
                return Verdict(
                    verdict="ACCEPT",
                    stage="check",
                    reason=INTERPRETED,
                    correct=True,
                    seconds=time.perf_counter() - start,
                )
            if not timed:
                return Verdict(
                    verdict="ACCEPT",
                    stage="check",
                    reason="correct on every workload (not timed)",
                    correct=True,
                    seconds=time.perf_counter() - start,
                )
            stage = "time"
            with self.device.exclusive():
                budget = time_budget_s or self.config.time_budget_s
                results, margin, setup, blind = self._time(workers, budget, replicate)
                self._watch(cand, "time")
            if blind:
                return Verdict.not_measured(blind, timing=setup, seconds=time.perf_counter() - start)
        except Reject as exc:
            return Verdict.reject(
                exc.stage, exc.reason, diagnostics=exc.diagnostics or diagnostics, seconds=time.perf_counter() - start
            )
        except WorkerFailure as exc:
            what = {"build": "while building", "check": "while checked", "time": "while timed"}.get(stage, "")
            return Verdict.reject(
                stage, f"{exc.reason} {what}".strip(), diagnostics=diagnostics, seconds=time.perf_counter() - start
            )
        except TimingReject as exc:
            return Verdict.reject("time", str(exc), seconds=time.perf_counter() - start)
        finally:
            for worker in (cand, workers.get("inc")):
                if worker is not None:
                    worker.close()
        verdict = decide(
            results,
            margin,
            incumbent is not None,
            self.config.sol_hack_factor,
            self.peaks,
            timing=setup,
            seconds=time.perf_counter() - start,
        )
        return verdict.model_copy(update={"reason": verdict.reason + note}) if note else verdict

    def close(self) -> None:
        """Stop every worker (an evaluation in flight in another thread ends as a worker failure)."""
        if self._clocks is not None:
            clocks.release(self.platform)
            self._clocks = None
        for worker in list(self._live):
            worker.close()
        if self._ref is not None:
            self._ref.close()
            self._ref = None
        if self._lane is not None:
            lanes.give(self._lane)
            self._lane = None

    def __del__(self) -> None:
        lane = getattr(self, "_lane", None)
        if lane is not None:
            lanes.give(lane)
            self._lane = None

    def __enter__(self) -> GuardSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
