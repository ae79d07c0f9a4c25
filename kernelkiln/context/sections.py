"""The pieces of a turn prompt, rendered one by one from the ``items`` template.

The builder counts each piece's tokens and decides which to keep; the wording lives in
``kernelkiln/context/prompts/*.md.j2``. A piece is rendered whole, never cut to fit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from kernelkiln.context.prompts import excerpt, macros, render
from kernelkiln.context.tiers import Tier, compact_code
from kernelkiln.guard.verdict import Verdict
from kernelkiln.memory.retrieval import Retrieved
from kernelkiln.policy.turn import Turn
from kernelkiln.store.records import Attempt, BoardEntry, Case, Rule


@dataclass(frozen=True)
class Piece:
    """One renderable item: ``key`` identifies it (an experience or attempt id), ``text`` is what is shown."""

    key: str
    text: str


def _items() -> Any:
    return macros("items")


def _clean(text: Any) -> str:
    return str(text).strip()


def _excerpt(code: str, limit: int | None) -> str:
    """The whole ``code`` when ``limit`` is None, else an excerpt of at most ``limit`` characters."""
    return code if limit is None else excerpt(code, limit) if limit > 0 else ""


# -- the hot layer ---------------------------------------------------------------------------


def hot_pieces(
    turn: Turn, *, max_diagnostics: int, code_chars: int | None, tier: Tier = "full"
) -> list[tuple[str, Piece]]:
    """(section name, piece) of the hot layer, in prompt order: task, lens, objective, code, feedback, draft.

    The compact and minimal tiers (``tiers.py``) say each section shorter; minimal keeps the task,
    the working code, the verdict and one instruction.
    """
    m = _items()
    if tier != "full":
        code = compact_code(turn.code) if turn.code.strip() else turn.code
        verdict = Piece(turn.feedback.id if turn.feedback else "none", _clean(m.verdict(_verdict_view(turn))))
        task = Piece("task", _clean(m.task_compact(turn.task, turn.platform)))
        working = Piece(turn.parent_id or "start", _clean(m.code_compact(code, turn.parent_id)))
        if tier == "minimal":
            instruction = Piece("instruction", _clean(m.instruction(turn.objective, turn.best_speedup)))
            return [("task", task), ("code", working), ("feedback", verdict), ("objective", instruction)]
        return [
            ("task", task),
            ("lens", Piece(turn.lens.name, _clean(m.lens_compact(turn.lens)))),
            (
                "objective",
                Piece(turn.objective, _clean(m.objective_compact(turn.objective, turn.best_speedup))),
            ),
            ("code", working),
            ("feedback", verdict),
        ]
    pieces = [
        ("task", Piece("task", _clean(m.task(turn.task, turn.platform)))),
        ("lens", Piece(turn.lens.name, _clean(m.lens(turn.lens)))),
        ("objective", Piece(turn.objective, _clean(m.objective(turn.objective, turn.turn, turn.best_speedup)))),
        ("code", Piece(turn.parent_id or "start", _clean(m.code(turn.code, turn.parent_id)))),
        (
            "feedback",
            Piece(
                turn.feedback.id if turn.feedback else "none",
                feedback_text(
                    turn.feedback, turn.verdict, turn.code, max_diagnostics=max_diagnostics, code_chars=code_chars
                ),
            ),
        ),
    ]
    if turn.objective == "draft":
        text = render(
            "draft",
            leaderboard=list(turn.leaderboard),
            best_speedup=turn.best_speedup,
            code_chars=code_chars if code_chars is not None else 10**9,
        )
        pieces.append(("draft", Piece("draft", _clean(text))))
    return pieces


def _verdict_view(turn: Turn) -> dict[str, Any] | None:
    """The latest verdict's title and reason alone (the compact tiers' feedback)."""
    return feedback_view(turn.feedback, turn.verdict, turn.code, max_diagnostics=0, code_chars=0)


def feedback_text(
    attempt: Attempt | None,
    verdict: Verdict | None,
    current_code: str,
    *,
    max_diagnostics: int,
    code_chars: int | None,
    heading: str = "## Latest feedback",
) -> str:
    """The guard's conclusion on ``attempt`` (the verdict's details when given, else what the attempt kept)."""
    return _clean(
        _items().feedback(
            feedback_view(attempt, verdict, current_code, max_diagnostics=max_diagnostics, code_chars=code_chars),
            heading,
        )
    )


def feedback_view(
    attempt: Attempt | None, verdict: Verdict | None, current_code: str, *, max_diagnostics: int, code_chars: int | None
) -> dict[str, Any] | None:
    """Plain values for the ``feedback`` macro (None: nothing evaluated yet)."""
    if attempt is None and verdict is None:
        return None
    case = attempt.case if attempt else Case()
    decision = verdict.verdict if verdict else cast(Attempt, attempt).verdict  # one of them is set
    speedup = verdict.speedup if verdict and verdict.speedup is not None else (attempt.speedup if attempt else None)
    vs_best = verdict.speedup_vs_incumbent if verdict else case.speedup_vs_incumbent
    margin = verdict.noise_margin if verdict else case.noise_margin
    title = f"Attempt {attempt.id}: {decision}" if attempt else f"Verdict: {decision}"
    if speedup is not None:
        title += f", {speedup:.2f}x over the reference"
    if vs_best is not None:
        title += f", {vs_best:.3f}x the best"
    if margin is not None:
        title += f" (noise band ±{margin:.1%})"
    diagnostics = list(verdict.diagnostics if verdict else case.diagnostics)
    code = attempt.code if attempt and attempt.code.strip() and attempt.code != current_code else ""
    shown = _excerpt(code, code_chars)
    return {
        "title": title,
        "summary": attempt.summary if attempt else "",
        "stage": verdict.stage if verdict else case.stage or (attempt.error_class if attempt else None),
        "reason": verdict.reason if verdict else case.reason,
        "diagnostics": [_diagnostic(d) for d in diagnostics[:max_diagnostics]],
        "more_diagnostics": max(0, len(diagnostics) - max_diagnostics),
        "workloads": _workloads(attempt, verdict),
        "code": shown,
        "code_cut": shown != code,
    }


def _diagnostic(d: Any) -> str:
    if not isinstance(d, dict):
        return " ".join(str(d).split())
    where = ":".join(str(d[k]) for k in ("line", "column") if d.get(k) is not None)
    message = " ".join(str(d.get("message", "")).split())
    return f"{'line ' + where + ': ' if where else ''}{d.get('severity', 'error')}: {message}"


def _workloads(attempt: Attempt | None, verdict: Verdict | None) -> list[str]:
    if verdict and verdict.workloads:
        return [
            f"{w.name}: reference {w.t_ref_s * 1e3:.4g} ms, yours {w.t_cand_s * 1e3:.4g} ms, {w.speedup:.2f}x"
            for w in verdict.workloads
        ]
    lines = []
    for m in attempt.measurements if attempt else ():
        times = ", ".join(
            f"{label} {t:.4g} ms" for label, t in (("reference", m.t_ref_ms), ("yours", m.t_cand_ms)) if t is not None
        )
        speed = f"{m.speedup:.2f}x" if m.speedup is not None else "no speedup"
        lines.append(f"{m.workload}: {times + ', ' if times else ''}{speed}")
    return lines


# -- the recent, warm and cold layers ----------------------------------------------------------


def heading(name: str, ids: Iterable[str] = ()) -> str:
    """The heading of section ``name`` (the experiences' heading lists the ids owed an adoption record)."""
    return _clean(_items().heading(name, list(ids)))


def attempt_pieces(attempts: Iterable[Attempt], code_chars: int | None) -> list[Piece]:
    """Earlier or graph-ranked attempts: verdict, speedup, summary and (an excerpt of) the code."""
    m = _items()
    return [Piece(a.id, _clean(m.attempt(a, _excerpt(a.code, code_chars)))) for a in attempts]


def rule_pieces(rules: Iterable[Rule]) -> list[Piece]:
    m = _items()
    return [Piece(r.id, _clean(m.rule(r))) for r in rules]


def experience_pieces(items: Iterable[Retrieved]) -> list[Piece]:
    m = _items()
    return [Piece(r.experience.id, _clean(m.experience(r))) for r in items]


def board_pieces(entries: Iterable[BoardEntry]) -> list[Piece]:
    m = _items()
    return [Piece(board_key(e), _clean(m.board_entry(e))) for e in entries]


def knowledge_pieces(items: Iterable[Retrieved]) -> list[Piece]:
    m = _items()
    return [Piece(r.experience.id, _clean(m.knowledge(r))) for r in items]


def board_key(entry: BoardEntry) -> str:
    """A stable identity of a board entry (its row id once stored)."""
    return (
        f"b-{entry.id}"
        if entry.id is not None
        else f"b-{entry.task_id}-{entry.kind}-{entry.attempt_id}-{entry.summary}"
    )
