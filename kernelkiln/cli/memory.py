"""``kiln memory``: inspect and maintain the experience memory behind a store URL."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from kernelkiln.cli.options import STORE_OPTION
from kernelkiln.errors import UserError
from kernelkiln.memory import Memory
from kernelkiln.memory.graph_text import graph_records, render_tree
from kernelkiln.memory.rules import priority
from kernelkiln.speedup import fmt_x
from kernelkiln.store import open_store
from kernelkiln.store.records import SUMMARY_CHARS
from kernelkiln.store.transfer import export_jsonl, import_records, read_jsonl

memory_app = typer.Typer(
    name="memory",
    help="Inspect and maintain kernelkiln's memory: experiences, attempt graphs, rules, board.",
    no_args_is_help=True,
)

JSON = typer.Option(False, "--json", help="Print one JSON object instead of text.")


def register(app: typer.Typer) -> None:
    """Add the ``memory`` sub-command group to ``app``."""
    app.add_typer(memory_app, name="memory")


def _memory(url: str | None) -> Memory:
    return Memory(open_store(url))


def _emit(as_json: bool, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2, default=str) if as_json else text)


@memory_app.command("stats")
def stats(store: str = STORE_OPTION, as_json: bool = JSON) -> None:
    """Counts of runs, tasks, attempts, experiences, knowledge, rules, stages and board entries."""
    data = _memory(store).stats()
    _emit(as_json, data, "\n".join(f"{k:<20} {v}" for k, v in data.items()))


@memory_app.command("search")
def search(
    query: str = typer.Argument(..., help="Free text, e.g. 'vectorize row reduction'."),
    platform: str = typer.Option(None, help="Only experiences for this platform (or for any)."),
    op_family: str = typer.Option(None, "--op-family", help="Only experiences for this op family (or for any)."),
    kind: str = typer.Option("all", help="experience, knowledge or all."),
    limit: int = typer.Option(10, min=1, help="How many results."),
    store: str = STORE_OPTION,
    as_json: bool = JSON,
) -> None:
    """Retrieve as an agent would: full-text pool, re-ranked by value and graph score."""
    kinds = {"all": ("experience", "knowledge"), "experience": ("experience",), "knowledge": ("knowledge",)}
    if kind not in kinds:
        raise UserError(f"--kind must be experience, knowledge or all, not {kind!r}")
    memory = _memory(store)
    if "knowledge" in kinds[kind]:
        memory.ensure_knowledge([platform] if platform else None)
    hits = memory.retrieve(query, platform=platform, op_family=op_family, kinds=kinds[kind], limit=limit)
    results: list[dict[str, Any]] = [
        {
            "id": h.experience.id,
            "kind": h.experience.kind,
            "score": h.score,
            "relevance": h.relevance,
            "q": h.experience.q,
            "summary": h.experience.summary or h.experience.text[:SUMMARY_CHARS],
        }
        for h in hits
    ]
    data = {"query": query, "results": results}
    lines = [f"{r['score']:.3f}  Q={r['q']:+.2f}  {r['id']}  {r['summary']}" for r in results]
    _emit(as_json, data, "\n".join(lines) or "no match")


@memory_app.command("show")
def show(
    record_id: str = typer.Argument(..., metavar="ID", help="An experience, rule or attempt id."),
    store: str = STORE_OPTION,
    as_json: bool = JSON,
) -> None:
    """Show one experience (with its rule and adoption records) or one attempt (with its journal)."""
    s = open_store(store)
    with s.read() as conn:
        exp = s.experiences.get(conn, record_id)
        if exp is not None:
            rule = s.rules.get(conn, record_id)
            adoptions = s.adoptions.for_experience(conn, record_id)
            data = {
                "type": "experience",
                "experience": exp.model_dump(mode="json"),
                "rule": rule.model_dump(mode="json") if rule else None,
                "adoptions": [a.model_dump(mode="json") for a in adoptions],
            }
            text = _experience_text(exp, rule, adoptions)
        elif (att := s.attempts.get(conn, record_id)) is not None:
            data = {"type": "attempt", "attempt": att.model_dump(mode="json")}
            text = (
                f"attempt {att.id}  task {att.task_id}  parent {att.parent_id or '—'}\n"
                f"verdict {att.verdict}  speedup {fmt_x(att.speedup)}  time {att.time_ms} ms  "
                f"tokens {att.tokens_in}+{att.tokens_out}\n"
                f"{att.summary}\n\n{att.journal}"
            )
        else:
            raise UserError(f"no experience, rule or attempt with id {record_id!r}")
    _emit(as_json, data, text)


def _experience_text(exp, rule, adoptions) -> str:
    tags = ", ".join(
        f"{k}={v}" for k, v in (("platform", exp.platform), ("op", exp.op_family), ("stage", exp.stage)) if v
    )
    head = (
        f"{exp.kind} {exp.id}  Q={exp.q:+.3f}  retrieved {exp.retrievals}  adopted {exp.adoptions} "
        f"over {exp.distinct_tasks} tasks  {'resident' if exp.resident else 'retrievable'}"
    )
    lines = [head, f"tags: {tags or '—'}  conditions: {', '.join(exp.conditions) or '—'}", "", exp.text]
    if rule:
        lines += ["", f"rule ({rule.tokens} tokens, f={rule.frequency:.3f}): {rule.text}"]
    for a in adoptions:
        lines.append(f"  {'adopted' if a.adopted else 'passed '} by {a.attempt_id} on {a.task_id}: {a.why}")
    return "\n".join(lines)


@memory_app.command("rules")
def rules(
    all_rules: bool = typer.Option(False, "--all", help="Also list evicted rules."),
    store: str = STORE_OPTION,
    as_json: bool = JSON,
) -> None:
    """Resident rules (always in context) with Q, frequency f, tokens ℓ and priority π = Q·f/ℓ."""
    s = open_store(store)
    with s.read() as conn:
        found = s.rules.list(conn, resident=None if all_rules else True)
        values = s.experiences.get_many(conn, [r.id for r in found])
    rows: list[dict[str, Any]] = []
    for r in found:
        q = values[r.id].q if r.id in values else 0.0
        rows.append(
            {
                "id": r.id,
                "resident": r.resident,
                "q": q,
                "frequency": r.frequency,
                "tokens": r.tokens,
                "priority": priority(q, r.frequency, r.tokens),
                "text": r.text,
            }
        )
    rows.sort(key=lambda r: (not r["resident"], -r["priority"]))
    lines = [
        f"{'R' if r['resident'] else ' '} π={r['priority']:.4f} Q={r['q']:+.2f} f={r['frequency']:.2f} "
        f"ℓ={r['tokens']:<4} {r['id']}  {r['text']}"
        for r in rows
    ]
    _emit(as_json, {"rules": rows}, "\n".join(lines) or "no rules")


@memory_app.command("board")
def board(task: str = typer.Argument(..., help="Task id."), store: str = STORE_OPTION, as_json: bool = JSON) -> None:
    """The task's shared board: its latest wins and traps, oldest first."""
    entries = _memory(store).board.read(task)
    data = {"task": task, "entries": [e.model_dump(mode="json") for e in entries]}
    lines = []
    for e in entries:
        gain = f" {e.speedup:.2f}x" if e.speedup else ""
        lines.append(f"{e.kind.upper():<4}{gain} [{e.agent or '—'}] {e.summary}")
        if e.reflection:
            lines.append(f"      {e.reflection}")
    _emit(as_json, data, "\n".join(lines) or f"no board entries for {task}")


@memory_app.command("graph")
def graph(task: str = typer.Argument(..., help="Task id."), store: str = STORE_OPTION, as_json: bool = JSON) -> None:
    """The task's attempt tree with relative speedups and graph scores d(v); * marks the best path."""
    g = _memory(store).graph(task)
    if not g.nodes:
        raise UserError(f"no attempts for task {task!r}")
    _emit(as_json, {"task": task, "best_path": g.best_path(), "nodes": graph_records(g)}, render_tree(g))


@memory_app.command("export")
def export(
    file: Path = typer.Argument(..., help="JSON Lines file to write ('-' for stdout)."),
    store: str = STORE_OPTION,
    as_json: bool = JSON,
) -> None:
    """Write every record (runs, tasks, stages, attempts, experiences, adoptions, rules, board) as JSON Lines."""
    s = open_store(store)
    if str(file) == "-":
        export_jsonl(s, sys.stdout)
        return
    try:
        with file.open("w", encoding="utf-8") as out:
            counts = export_jsonl(s, out)
    except OSError as exc:
        raise UserError(f"cannot write {file}: {exc.strerror}") from None
    _emit(as_json, {"file": str(file), "records": dict(counts)}, f"exported {sum(counts.values())} records to {file}")


@memory_app.command("import")
def import_(
    file: Path = typer.Argument(..., help="JSON Lines file written by `kiln memory export`."),
    store: str = STORE_OPTION,
    as_json: bool = JSON,
) -> None:
    """Merge an export into the store; records already present (same id) are skipped."""
    records = read_jsonl(file)
    added = import_records(open_store(store), records)
    _emit(
        as_json,
        {"file": str(file), "read": len(records), "added": dict(added)},
        f"read {len(records)} records, added {sum(added.values())}",
    )


@memory_app.command("prune")
def prune(
    dry_run: bool = typer.Option(False, "--dry-run", help="Only report what would be removed."),
    store: str = STORE_OPTION,
    as_json: bool = JSON,
) -> None:
    """Remove exactly two things: (1) board entries older than each task's latest 16 (the
    retention horizon); (2) experiences retrieved in at least 10 stages, never adopted, whose
    value Q sits at the floor −0.2, with their adoption records. Never touches attempts,
    rules, stages, runs, knowledge or resident experiences."""
    report = _memory(store).prune(dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    data = {"dry_run": dry_run, "board_entries": report.board_entries, "experiences": report.experiences}
    _emit(as_json, data, f"{verb} {report.board_entries} board entries and {len(report.experiences)} experiences")
