"""The report as one self-contained HTML page: inline CSS and SVG, no scripts, no external assets."""

from __future__ import annotations

from kernelkiln import __version__
from kernelkiln.orchestrator.results import VERDICTS
from kernelkiln.report.format import fmt_date, fmt_duration, fmt_pct, fmt_tokens, fmt_x
from kernelkiln.report.records import Report, RunReport, TaskReport
from kernelkiln.report.svg import VERDICT_COLOURS, esc, growth, hbars, marker, svg, trajectory
from kernelkiln.report.tree import attempt_graph

VERDICT_MEANING = {
    "KEEP": "correct and faster than the task's best beyond the measured noise (the first correct candidate is KEEP "
    "too): the task's new best; the agent continues from it.",
    "ACCEPT": "correct, within the noise band of the best: the agent continues from it (its own branch).",
    "REVERT": "correct but slower than the best: the agent returns to its best code.",
    "REJECT": "failed the gate, the build or a correctness check: the agent's code is unchanged.",
}
DRAFT_MEANING = (
    "after 5 ACCEPT/REVERT in a row (a plateau) an agent drafts: it stops local tuning and changes "
    "strategy, seeing the other agents' best snapshots."
)
NO_SOL = "SOL: not available (run `kiln machine`)"

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:980px;padding:16px 24px;
color:#222;line-height:1.4}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.25em;border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:1.6em}
h3{font-size:1.08em;margin:1.4em 0 .3em}h4{font-size:.95em;margin:.8em 0 .2em;color:#444}
table{border-collapse:collapse;margin:.5em 0;font-size:.92em}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f5f5f5}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.meta{color:#555;font-size:.92em}.note{background:#fff8e1;border-left:4px solid #f9a825;padding:6px 10px}
.status{display:inline-block;padding:1px 8px;border-radius:10px;background:#eee;font-size:.85em}
.status.done{background:#e8f5e9;color:#1b5e20}.status.stopped,.status.interrupted{background:#fff3e0}
.status.failed{background:#ffebee;color:#b71c1c}
.v{display:inline-block;min-width:1.6em;text-align:center;border-radius:3px;color:#fff;padding:0 3px;margin-right:2px}
.legend td:first-child{white-space:nowrap}.legend svg{display:inline-block;vertical-align:middle}.muted{color:#777}
svg{max-width:100%;height:auto;display:block}
code{background:#f3f3f3;padding:0 3px;border-radius:3px}
"""


def render(report: Report) -> str:
    """The whole page."""
    runs = report.runs
    heading = f"kiln report: {runs[0].run_id}" if len(runs) == 1 else f"kiln report: {len(runs)} runs"
    parts = [
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(heading)}</title>',
        f"<style>{CSS}</style></head><body>",
        f"<h1>{esc(heading)}</h1>",
    ]
    if len(runs) == 1:
        parts.append(_run_meta(runs[0]))
    else:
        parts.append(_comparison(runs))
    parts.append(_legend())
    for run in runs:
        parts.append(_run_section(run, heading=len(runs) > 1))
    parts.append(_rules(report))
    store = f" · store {esc(report.store_url)}" if report.store_url else ""
    parts.append(
        f'<p class="meta">made by kernelkiln {esc(__version__)} at {esc(fmt_date(report.generated_at))}'
        f"{store} · one self-contained file: no scripts, no external assets; hover a point for its "
        f"attempt.</p></body></html>\n"
    )
    return "".join(parts)


def _status(status: str) -> str:
    return f'<span class="status {esc(status)}">{esc(status)}</span>'


def _run_meta(run: RunReport) -> str:
    duration = run.wall_s
    cost = f" · cost ${run.cost_usd:.4f}" if run.cost_usd else ""
    out = f" · output <code>{esc(run.out)}</code>" if run.out else ""
    when = f" · started {esc(fmt_date(run.created_at))}" if run.created_at else ""
    took = f" · took {esc(fmt_duration(duration))}" if duration is not None else ""
    tokens = (
        f"tokens {fmt_tokens(run.prompt_tokens)} prompt + {fmt_tokens(run.completion_tokens)} completion"
        if run.prompt_tokens or run.completion_tokens
        else "no model tokens (offline tuner)"
    )
    return (
        f'<p class="meta">run <code>{esc(run.run_id)}</code> {_status(run.status)}{when}{took} · '
        f"{len(run.tasks)} task(s) · {sum(t.attempts for t in run.tasks)} attempts · {tokens}{cost}{out}</p>"
    )


def _legend() -> str:
    rows = "".join(f"<tr><td>{marker_svg(v)} <b>{v}</b></td><td>{esc(m)}</td></tr>" for v, m in VERDICT_MEANING.items())
    draft = (
        '<svg width="16" height="14"><line x1="8" y1="0" x2="8" y2="14" stroke="#7b1fa2" stroke-width="1.5" '
        'stroke-dasharray="2 3"/></svg>'
    )
    rows += f"<tr><td>{draft} <b>drafting</b></td><td>{esc(DRAFT_MEANING)}</td></tr>"
    return (
        f'<h4>Verdicts</h4><table class="legend">{rows}</table><p class="meta">Speedups are times of the '
        f"PyTorch reference divided by the candidate's (geometric mean over the task's workloads): "
        f"<b>1.00x = as fast as torch</b>, above is faster. "
        f"A verdict compares the candidate with the best of that moment "
        f"timed in the same evaluation, so under noisy timing an ACCEPT can sit above the best-so-far line; hover "
        f"a point for both figures.</p>"
    )


def marker_svg(verdict: str) -> str:
    """A verdict's marker as a small inline SVG."""
    return svg(14, 14, [marker(verdict, 7, 7, r=5)], verdict)


def _badges(counts: dict[str, int]) -> str:
    return "".join(
        f'<span class="v" style="background:{VERDICT_COLOURS[v]}" title="{v}">{counts.get(v, 0)}</span>'
        for v in VERDICTS
    )


def _verdict_words() -> str:
    words = " ".join(f'<small style="color:{VERDICT_COLOURS[v]}">{v}</small>' for v in VERDICTS)
    return f'<span style="white-space:nowrap">{words}</span>'


def _suite_table(run: RunReport) -> str:
    searched = "<th>best in search</th>" if run.confirmed else ""
    tokens = run.prompt_tokens or run.completion_tokens
    head = (
        f"<tr><th>task</th><th>best vs torch</th>{searched}<th>start vs torch</th><th>best / start</th>"
        f"<th>attempts<br>{_verdict_words()}</th>{'<th>tokens</th>' if tokens else ''}<th>the best's change</th>"
        "</tr>"
    )
    rows = []
    for t in run.tasks:
        rows.append(
            f'<tr><td><a href="#{_anchor(run, t)}">{esc(t.task_id)}</a></td><td class=n><b>{fmt_x(t.best_speedup)}'
            f"</b></td>{f'<td class=n>{fmt_x(t.search_speedup)}</td>' if run.confirmed else ''}"
            f"<td class=n>{fmt_x(t.start_speedup)}</td><td class=n>{fmt_x(t.best_over_start)}</td>"
            f"<td class=n>{_attempts(run, t)}: {_badges(t.verdicts)}</td>"
            f"{f'<td class=n>{fmt_tokens(t.tokens)}</td>' if tokens else ''}<td>{esc(t.best_summary or '—')}</td></tr>"
        )
    note = (
        (
            "best vs torch: the best candidate judged again, from scratch and with a longer timing budget, when "
            "its task ended; best in search: the same candidate as the search measured it (a few seconds of timing, "
            "so noisier, and picked because it measured well). "
        )
        if run.confirmed
        else ""
    )
    if any(run.short(t) for t in run.tasks):
        note += (
            f"N of {run.budget} attempts: the search ran out of candidates before the budget (the tuner had "
            "tried every setting the starting candidate's knobs allow)."
        )
    return f"<table>{head}{''.join(rows)}</table>" + (f'<p class="meta">{esc(note)}</p>' if note else "")


def _attempts(run: RunReport, task: TaskReport) -> str:
    return f"{task.attempts} of {run.budget}" if run.short(task) else str(task.attempts)


def _anchor(run: RunReport, task: TaskReport) -> str:
    return esc(f"{run.run_id}-{task.task_id}")


def _run_section(run: RunReport, heading: bool) -> str:
    parts = []
    if heading:
        parts.append(f"<h2>Run {esc(run.run_id)}</h2>{_run_meta(run)}")
    if run.note:
        parts.append(f'<p class="note">{esc(run.note)}</p>')
    parts.append(f"<h3>Suite</h3>{_suite_table(run)}")
    rows = [
        (t.task_id if t.attempts else f"{t.task_id} (not started)", [t.start_speedup, t.best_speedup])
        for t in run.tasks
    ]
    parts.append("<h4>Speedup vs torch (higher is better)</h4>")
    parts.append(
        hbars(
            rows,
            [("starting candidate", "#b0bec5"), ("best found", "#2e7d32")],
            unit="x vs torch (1.0 = as fast as the PyTorch reference)",
            ref=1.0,
            ref_label="torch 1.0x",
            title=f"speedup vs torch per task, run {run.run_id}",
        )
    )
    parts.append("<h4>Speed of light (fraction of the machine's roofline bound reached by the best)</h4>")
    if run.has_sol:
        sol = [(f"{t.task_id} ({t.reached})" if t.reached else t.task_id, [t.sol_fraction]) for t in run.tasks]
        parts.append(
            hbars(
                sol,
                [("best found", "#6a1b9a")],
                unit="share of the speed-of-light bound (100% = the roofline)",
                ref=1.0,
                ref_label="speed of light",
                fmt=fmt_pct,
                tick_fmt=fmt_pct,
                title=f"speed-of-light fraction per task, run {run.run_id}",
            )
        )
    else:
        parts.append(f'<p class="muted">{esc(NO_SOL)}</p>')
    parts.append("<h3>Memory growth</h3>")
    if run.history and run.growth:
        added = run.growth[-1][1] - run.experiences_before
        parts.append(
            f'<p class="meta">{run.experiences_before} experiences before the run, {added} added during it '
            f"(each KEEP derived from a parent, and each task's best configuration).</p>"
        )
        parts.append(growth(run.growth, f"experiences in the store during run {run.run_id}"))
    else:
        parts.append('<p class="muted">not available (the run is not in the store)</p>')
    for task in run.tasks:
        parts.append(_task_section(run, task))
    return "".join(parts)


def _task_section(run: RunReport, task: TaskReport) -> str:
    parts = [f'<h3 id="{_anchor(run, task)}">{esc(task.task_id)}</h3>']
    best = (
        f"best {fmt_x(task.best_speedup)} vs torch"
        if task.best_speedup is not None
        else "no correct candidate"
        if task.attempts
        else "not started"
    )
    start = f", start {fmt_x(task.start_speedup)}" if task.start_speedup is not None else ""
    if task.confirmed:
        best += f" when judged again (in search: {fmt_x(task.search_speedup)})"
    if task.confirm_failure:
        best += f" in search; judged again it failed ({task.confirm_failure})"
    change = f" — best's change: {task.best_summary}" if task.best_summary else ""
    change += "".join(f" · {n}" for n in (task.adoption_note, task.tier_note) if n)
    agents = f" · agents {esc(', '.join(task.agents))}" if task.agents else ""
    parts.append(
        f'<p class="meta">{esc(best + start)} · {task.attempts} attempts ({_badges(task.verdicts)})'
        f"{agents}{esc(change)}</p>"
    )
    if task.status != "evaluated":
        parts.append(f'<p class="note">{esc(task.status)}: {esc(task.reason)}</p>')
    if not task.points:
        why = "the run's attempts are not in the store" if not run.history else "no attempts"
        parts.append(f'<p class="muted">trajectory and attempt graph: not available ({why})</p>')
        return "".join(parts)
    parts.append("<h4>Trajectory: speedup of each attempt</h4>")
    parts.append(trajectory(task.points, task.agents, f"trajectory of {task.task_id}"))
    parts.append("<h4>Attempt graph: which attempt each was derived from</h4>")
    parts.append(attempt_graph(task.points, task.best_path, f"attempt graph of {task.task_id}"))
    return "".join(parts)


def _rules(report: Report) -> str:
    if not report.rules:
        return '<h2>Resident rules</h2><p class="muted">not available (no store)</p>'
    parts = []
    for url, rules in report.rules.items():
        where = f" in {url}" if len(report.rules) > 1 else ""
        parts.append(f"<h2>Resident rules{esc(where)}</h2>")
        if not rules:
            parts.append(
                '<p class="muted">none yet: an experience becomes a rule once it has Q &gt; 0 and was '
                "adopted at least 3 times over 3 distinct tasks.</p>"
            )
            continue
        parts.append(
            '<p class="meta">Always in every agent\'s context, as the store holds them now; π = Q·f/ℓ '
            "decides which fit the token budget.</p><table><tr><th>rule</th><th>Q</th><th>f</th>"
            "<th>ℓ tokens</th><th>π</th><th>text</th></tr>"
        )
        for r in rules:
            parts.append(
                f"<tr><td><code>{esc(r.id)}</code></td><td class=n>{r.q:+.2f}</td><td class=n>"
                f"{r.frequency:.2f}</td><td class=n>{r.tokens}</td><td class=n>{r.priority:.4f}</td>"
                f"<td>{esc(r.text)}</td></tr>"
            )
        parts.append("</table>")
    return "".join(parts)


def _comparison(runs: tuple[RunReport, ...]) -> str:
    tasks = list(dict.fromkeys(t.task_id for run in runs for t in run.tasks))
    head = "".join(f"<th>{esc(r.run_id)}<br>{_status(r.status)}</th>" for r in runs)
    rows = []
    for task_id in tasks:
        cells, values = [], []
        for run in runs:
            found = next((t for t in run.tasks if t.task_id == task_id), None)
            value = found.best_speedup if found else None
            if value is not None:
                values.append(value)
            cells.append(f"<td class=n>{fmt_x(value)}</td>")
        spread = f"{fmt_x(min(values))} – {fmt_x(max(values))}" if values else "—"
        rows.append(f"<tr><td>{esc(task_id)}</td>{''.join(cells)}<td class=n>{spread}</td></tr>")
    return (
        f'<p class="meta">{len(runs)} runs, best speedup vs torch per task:</p><table><tr><th>task</th>{head}'
        f"<th>range</th></tr>{''.join(rows)}</table>"
    )
