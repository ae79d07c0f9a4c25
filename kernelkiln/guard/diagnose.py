"""Diagnostics an agent may ask for before it submits: checks, a profile, a vectorization report.

Each runs the candidate through the same guard (gate, sandboxed build and worker) and
returns plain text for a model to read; none of them records an attempt.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the session (and torch) load with the orchestrator; the tool names need neither
    from kernelkiln import native
    from kernelkiln.guard.config import GuardConfig
    from kernelkiln.guard.verdict import Verdict
    from kernelkiln.task import Task

_VEC_FLAGS = ("-fopt-info-vec-optimized", "-fopt-info-vec-missed")
_VEC_LINES = 60
_REMARK = re.compile(r"(optimized|missed|note): ")


class Judge(Protocol):
    """What the tools run a candidate with: a GuardSession, or a task's handle on an evaluation pool."""

    task: Task
    config: GuardConfig

    def evaluate(
        self, source: str, incumbent: str | None = None, *, timed: bool = True, time_budget_s: float | None = None
    ) -> Verdict: ...

    def native_requests(self, source: str) -> list[native.BuildRequest]: ...

    def build_as_sandbox(self, request: native.BuildRequest) -> native.BuildResult: ...


def check_report(session: Judge, source: str) -> str:
    """Gate, build and every correctness trial, untimed: PASS, or the first failure in detail."""
    verdict = session.evaluate(source, timed=False)
    if verdict.correct:
        workloads, trials = len(session.task.workloads), session.config.check_trials
        return f"PASS: correct on all {workloads} workload(s), {trials} trials each"
    lines = [f"FAIL at {verdict.stage}: {verdict.reason}"]
    for d in verdict.diagnostics[:10]:
        where = f"line {d.get('candidate_line') or d.get('line')}" if d.get("line") else ""
        lines.append(f"  {d.get('severity', 'error')} {where}: {d.get('message', '')}".rstrip())
    return "\n".join(lines)


def profile_report(session: Judge, source: str, budget_s: float) -> str:
    """A short timing run against the reference: per-workload times and speedups."""
    verdict = session.evaluate(source, time_budget_s=budget_s)
    if not verdict.correct:
        return f"FAIL at {verdict.stage}: {verdict.reason}"
    if not verdict.timed:
        return f"NOT TIMED: {verdict.reason}"
    rows = [
        f"{w.name}: t_ref {w.t_ref_s * 1e3:.4g} ms, t_cand {w.t_cand_s * 1e3:.4g} ms, "
        f"speedup {w.speedup:.3f}x (±{w.spread:.1%})"
        for w in verdict.workloads
    ]
    return "\n".join([f"geometric-mean speedup {verdict.speedup:.3f}x over the reference (short run)", *rows])


def vectorization_report(session: Judge, source: str) -> str:
    """The compiler's vectorization remarks for each native build the candidate makes."""
    requests = session.native_requests(source)
    if not requests:
        return "no native code was built (the candidate failed to load, or builds nothing natively)"
    out = []
    for i, request in enumerate(requests, 1):
        traced = dataclasses.replace(request, flags=(*request.flags, *_VEC_FLAGS))
        result = session.build_as_sandbox(traced)
        remarks = [line.strip() for line in result.log.splitlines() if _REMARK.search(line)]
        out.append(
            f"build {i} (flags: {' '.join(request.flags) or 'defaults'}): "
            f"{'ok' if result.ok else 'failed'}, {len(remarks)} remark(s)"
        )
        out.extend(f"  {line}" for line in remarks[:_VEC_LINES])
        if len(remarks) > _VEC_LINES:
            out.append(f"  … {len(remarks) - _VEC_LINES} more")
    return "\n".join(out)


# The one list of diagnostics: name -> report(session, code, profile budget in seconds).
# agents/tools.yaml describes each of them to a model.
TOOLS: dict[str, Callable[[Judge, str, float], str]] = {
    "run_checks": lambda session, source, _budget_s: check_report(session, source),
    "profile": profile_report,
    "vectorization_report": lambda session, source, _budget_s: vectorization_report(session, source),
}


def diagnoser(session: Judge, profile_budget_s: float) -> Callable[[str, str], str]:
    """A Turn's ``diagnose``: ``(tool name, code) -> report``, every tool run by ``session``."""

    def run(tool: str, source: str) -> str:
        report = TOOLS.get(tool)
        return report(session, source, profile_budget_s) if report else f"unknown diagnostic {tool!r}"

    return run
