"""What a report shows, collected from the store (or a run.json alone) into ``records``."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from kernelkiln.errors import UserError
from kernelkiln.memory.graph import ExperienceGraph
from kernelkiln.memory.rules import priority
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.results import VERDICTS, RunResult, TaskResult, incumbent, task_summary
from kernelkiln.report.records import Point, Report, RuleRow, RunReport, TaskReport
from kernelkiln.report.sources import bench_sol, read_run_json, sibling_store_url
from kernelkiln.stats import geomean
from kernelkiln.store.records import Attempt, Confirmation, Experience, NoCandidate, Run
from kernelkiln.store.store import Store, open_store


# -- collecting ------------------------------------------------------------------------
def collect(targets: list[str], store: Store | None, store_error: str = "", *, allow_missing: bool = False) -> Report:
    """The report of ``targets`` (run ids or output DIRs); ``store`` None when it could not be opened.

    A DIR's run is read from ``store``, else from a bench repeat's own store next to it; a run in
    neither is a UserError unless ``allow_missing``, which reports it from its run.json alone (the
    page then says what is unavailable).
    """
    runs: list[RunReport] = []
    rules: dict[str, tuple[RuleRow, ...]] = {}
    for target in targets:
        found = read_run_json(target)
        if found is None:
            if store is None:
                raise UserError(f"run {target}: {store_error or 'no store'}")
            runs.append(_from_store(store, target, None))
            rules.setdefault(store.url, tuple(resident_rules(store)))
            continue
        folder, data = found
        run_id = data.run_id
        holder, owned = _holder(store, folder, run_id)
        try:
            if holder is None:
                where = f"not in store {store.url}" if store is not None else f"unread ({store_error})"
                if not allow_missing:
                    raise UserError(
                        f"run {run_id} of {folder} is {where}: give the store it ran with (--store URL), "
                        "or --allow-missing to report its run.json alone"
                    )
                run = from_run_json(
                    data,
                    str(folder),
                    f"run {run_id} is {where}: attempt history, graphs and memory growth are unavailable",
                )
            else:
                run = _from_store(holder, run_id, str(folder))
                rules.setdefault(holder.url, tuple(resident_rules(holder)))
        finally:
            if owned and holder is not None:
                holder.close()
        runs.append(_with_sol(run, bench_sol(folder, run_id)))
    return Report(runs=tuple(runs), rules=rules, store_url=store.url if store is not None else None)


def _holder(store: Store | None, folder: Path, run_id: str) -> tuple[Store | None, bool]:
    """The store holding ``run_id`` and whether it was opened here (to be closed)."""
    if store is not None and _stored_run(store, run_id) is not None:
        return store, False
    url = sibling_store_url(folder)
    if url is None:
        return None, False
    sibling = open_store(url)
    if _stored_run(sibling, run_id) is not None:
        return sibling, True
    sibling.close()
    return None, False


def _with_sol(run: RunReport, fractions: dict[str, tuple[float, str]]) -> RunReport:
    """SOL fractions (and the bound and rate reached) recorded elsewhere (bench.json) for tasks that carry none."""
    if not fractions:
        return run
    tasks = tuple(
        t
        if t.sol_fraction is not None or t.task_id not in fractions
        else replace(t, sol_fraction=fractions[t.task_id][0], reached=fractions[t.task_id][1])
        for t in run.tasks
    )
    return replace(run, tasks=tasks)


def from_run_json(data: RunResult, out: str | None, note: str = "") -> RunReport:
    """A run as run.json alone describes it (no attempts, no memory)."""
    return RunReport(
        run_id=data.run_id,
        status=data.status,
        tasks=tuple(_task_from(task_id, t) for task_id, t in data.tasks.items()),
        created_at=_timestamp(data.started_at),
        finished_at=_timestamp(data.ended_at),
        prompt_tokens=data.prompt_tokens,
        completion_tokens=data.completion_tokens,
        cost_usd=data.cost_usd,
        out=out,
        history=False,
        note=note,
    )


def _task_from(task_id: str, t: TaskResult, **more: Any) -> TaskReport:
    """A task's report row from its run.json entry; ``more``: what the store adds (points, the path to its best)."""
    confirmation = t.confirmation
    failure = f"{confirmation.verdict}: {confirmation.reason}" if confirmation and not confirmation.correct else ""
    return TaskReport(
        task_id=task_id,
        best_speedup=t.confirmed_speedup or t.best_speedup,
        search_speedup=t.best_speedup,
        confirmed=t.confirmed_speedup is not None,
        confirm_failure=failure,
        start_speedup=t.start_speedup,
        attempts=t.attempts,
        verdicts={v: t.verdicts.get(v, 0) for v in VERDICTS},
        prompt_tokens=t.prompt_tokens,
        completion_tokens=t.completion_tokens,
        cost_usd=t.cost_usd,
        best_summary=t.best_summary,
        best_attempt=t.best_attempt,
        status=t.status,
        reason=t.reason,
        adoptions_owed=t.adoptions_owed,
        adoptions_not_stated=t.adoptions_not_stated,
        prompt_tiers=dict(t.prompt_tiers),
        **more,
    )


# -- the store ------------------------------------------------------------------------
def _stored_run(store: Store, run_id: str) -> Run | None:
    with store.read() as conn:
        return store.runs.get(conn, run_id)


def _from_store(store: Store, run_id: str, out: str | None) -> RunReport:
    with store.read() as conn:
        run = store.runs.get(conn, run_id)
        if run is None:
            also = "" if run_id.startswith("r-") else f" (nor a directory {run_id!r})"
            raise UserError(f"no run {run_id!r} in {store.url}{also}")
        attempts = store.attempts.for_run(conn, run_id)
        experiences = [e for e in store.experiences.list(conn, kind="experience")]
    by_task: dict[str, list[Attempt]] = {t.id: [] for t in run.state.tasks}
    for attempt in attempts:
        by_task.setdefault(attempt.task_id, []).append(attempt)
    model = OptimizeConfig.stored(run.config).policy.model_written
    tasks = tuple(
        task_report(task_id, found, run.state.confirmed.get(task_id), run.state.no_candidate.get(task_id), model)
        for task_id, found in by_task.items()
    )
    finished = run.state.ended_at or max((a.created_at for a in attempts), default=None)
    growth, before = memory_growth(run.created_at, attempts, experiences)
    return RunReport(
        run_id=run.id,
        status=run.state.status,
        tasks=tasks,
        created_at=run.created_at,
        finished_at=finished,
        prompt_tokens=sum(t.prompt_tokens for t in tasks),
        completion_tokens=sum(t.completion_tokens for t in tasks),
        cost_usd=round(sum(t.cost_usd for t in tasks), 6),
        out=out or run.state.out,
        growth=growth,
        experiences_before=before,
        budget=run.config.get("budget"),
        source=store.url,
    )


def task_report(
    task_id: str,
    attempts: list[Attempt],
    confirmation: Confirmation | None = None,
    no_candidate: NoCandidate | None = None,
    model_written: bool = False,
) -> TaskReport:
    """One task's figures (as run.json has them), its attempts as points and the path to its best."""
    points = tuple(
        Point(
            index=i,
            id=a.id,
            agent=a.agent or "—",
            lens=a.lens,
            verdict=a.verdict,
            speedup=a.speedup if a.correct else None,
            objective=a.case.objective,
            parent_id=a.parent_id,
            summary=a.summary,
            sol_fraction=attempt_sol(a),
            vs_best=_number(a.case.speedup_vs_incumbent),
        )
        for i, a in enumerate(attempts, start=1)
    )
    best = incumbent(attempts)
    return _task_from(
        task_id,
        task_summary(attempts, None, confirmation, no_candidate, model_written),
        sol_fraction=attempt_sol(best) if best else None,
        points=points,
        best_path=path_to(attempts, best),
    )


def path_to(attempts: list[Attempt], best: Attempt | None) -> tuple[str, ...]:
    """Attempt ids from a root of the task's graph down to ``best`` (empty without a best)."""
    if best is None:
        return ()
    graph = ExperienceGraph(attempts)
    path: list[str] = []
    node = graph.nodes.get(best.id)
    while node is not None and node.id not in path:
        path.append(node.id)
        node = graph.parent(node.id)
    return tuple(reversed(path))


def memory_growth(
    start: float, attempts: list[Attempt], experiences: list[Experience]
) -> tuple[tuple[tuple[float, int], ...], int]:
    """Experiences in the store over the run: ``((seconds since start, count), …)`` and the count before it.

    The run's window ends at its last attempt, or later when an experience distilled from one of its
    attempts was written after it (a task's best configuration is distilled when the task ends).
    """
    ids = {a.id for a in attempts}
    end = max(
        [a.created_at for a in attempts] + [e.created_at for e in experiences if e.source_attempt_id in ids],
        default=start,
    )
    times = sorted(e.created_at for e in experiences)
    before = sum(1 for t in times if t < start)
    growth = [(0.0, before)]
    count = before
    for t in times:
        if start <= t <= end:
            count += 1
            growth.append((t - start, count))
    if end > start and growth[-1][0] < end - start:
        growth.append((end - start, count))
    return tuple(growth), before


def resident_rules(store: Store) -> list[RuleRow]:
    """The store's resident rules, highest priority first."""
    with store.read() as conn:
        rules = store.rules.list(conn, resident=True)
        values = store.experiences.get_many(conn, [r.id for r in rules])
    rows = [
        RuleRow(
            id=r.id,
            text=r.text,
            q=values[r.id].q if r.id in values else 0.0,
            frequency=r.frequency,
            tokens=r.tokens,
            priority=priority(values[r.id].q if r.id in values else 0.0, r.frequency, r.tokens),
        )
        for r in rules
    ]
    return sorted(rows, key=lambda r: (-r.priority, r.id))


# -- speed of light ---------------------------------------------------------------------
def attempt_sol(attempt: Attempt) -> float | None:
    """The attempt's speed-of-light fraction when it was recorded (geometric mean over workloads), else None."""
    found = [_number(m.sol_fraction) for m in attempt.measurements]
    return geomean(v for v in found if v is not None and v > 0)


def _timestamp(value: Any) -> float | None:
    """An ISO 8601 time of run.json as epoch seconds (None when absent or unreadable)."""
    try:
        return datetime.fromisoformat(value).timestamp() if isinstance(value, str) else None
    except ValueError:
        return None


def _number(value: Any) -> float | None:
    return (
        float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        else None
    )
