"""An ablation of `kiln ablate` as one self-contained HTML page (inline CSS and SVG, no scripts) or Markdown."""

from __future__ import annotations

import time

from kernelkiln import __version__
from kernelkiln.report.ablation_data import STORES, Ablation, Shown, Study, Table, reuse_line, table
from kernelkiln.report.ablation_svg import arm_colours, forest, reach, reuse_bars
from kernelkiln.report.format import fmt_date, fmt_duration
from kernelkiln.report.html import CSS
from kernelkiln.report.markdown import md
from kernelkiln.report.svg import esc

EXTRA_CSS = """
.plots{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}.q{font-size:1.05em;margin:.3em 0}
table.arms td:first-child{white-space:nowrap}tr.ratio td{background:#fafafa;font-style:italic}tr.floor td{color:#555}
td .ci{color:#777;font-size:.9em}
td.n.better{color:#1b5e20;background:#e8f5e9}td.n.worse{color:#b71c1c;background:#ffebee}
"""
FIGURES = (
    "final: the incumbent's value when the budget is spent; anytime: its mean over the budget (reaching a "
    "good kernel early counts); evaluations to 95%: until the incumbent is worth 95% of the task's best known "
    "figure (budget + 1 when never; fewer is better). Each a geometric mean over tasks, then over repeats "
    "with its 95% interval [low, high]; a ratio row is the arm over the study's first arm (its reference), "
    "paired by repeat, and anytime / best-of-N the arm over the floor: the seed, then random settings at the "
    "same budget."
)
TONES = "Green: the ratio's 95% interval lies wholly on the better side of 1; red: on the worse side."


def render_html(ablation: Ablation) -> str:
    """The whole page: what was run, then a section per study."""
    heading = f"kiln ablation: {', '.join(s.name for s in ablation.studies) or 'no studies'}"
    parts = [
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{esc(heading)}</title>',
        f"<style>{CSS}{EXTRA_CSS}</style></head><body><h1>{esc(heading)}</h1>",
        _header(ablation),
    ]
    if ablation.studies:
        links = " · ".join(f'<a href="#study-{esc(s.name)}">{esc(s.name)}</a>' for s in ablation.studies)
        parts.append(f'<p class="meta">studies: {links}</p>')
    parts += [_study(ablation, s) for s in ablation.studies]
    parts.append(
        f'<p class="meta">made by kernelkiln {esc(__version__)} at {esc(fmt_date(time.time()))} from '
        f"<code>{esc(ablation.folder / 'ablation.json')}</code> · one self-contained file: no scripts, no "
        f"external assets; hover a point for its figures.</p></body></html>\n"
    )
    return "".join(parts)


def _header(ablation: Ablation) -> str:
    tasks = ", ".join(f"<code>{esc(t)}</code>" for t in ablation.tasks) or "none"
    return (
        f'<p class="meta">{len(ablation.tasks)} task(s): {tasks}<br>budget {ablation.budget} evaluations per '
        f"task · {ablation.repeat} repeat(s) · wall time {esc(fmt_duration(ablation.seconds))}</p>"
        f'<p class="meta"><b>Figures</b> — {esc(ablation.figures or "as measured")}. {esc(FIGURES)}</p>'
        f'<p class="meta">{esc(STORES)} {esc(TONES)}</p>'
    )


def _study(ablation: Ablation, study: Study) -> str:
    parts = [f'<h2 id="study-{esc(study.name)}">{esc(study.name)}</h2><p class="q">{esc(study.question)}</p>']
    reference = f"reference: {esc(study.reference)} · " if study.reference and study.metric != "reuse" else ""
    parts.append(f'<p class="meta">{reference}wall time {esc(fmt_duration(study.seconds))}</p>')
    if study.metric == "reuse":
        parts.append(f"<p>{esc(reuse_line(study, len(ablation.tasks)))}</p>")
        if study.per_repeat:
            parts.append(reuse_bars(study))
        return "".join(parts)
    if not study.arms:
        return "".join(parts) + '<p class="muted">no arms</p>'
    parts.append(_html_table(table(study, ablation.floor)))
    if study.metric == "speedup":
        curves = reach(study, ablation.floor, ablation.budget, arm_colours(ablation.studies))
        parts.append(
            f'<div class="plots"><div><h4>Each arm over {esc(study.reference)}</h4>{forest(study)}</div>'
            f"<div><h4>Evaluations to 95% of the best</h4>{curves}</div></div>"
        )
    return "".join(parts)


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in t.head)
    rows = []
    for row in t.rows:
        label = f"<b>{esc(row.label)}</b>" if row.kind == "arm" else esc(row.label)
        rows.append(
            f'<tr class="{row.kind}"><td>{label}</td><td class="muted">{esc(row.memory)}</td>'
            f"{''.join(_html_cell(c) for c in row.cells)}</tr>"
        )
    return f'<table class="arms"><tr>{head}</tr>{"".join(rows)}</table>'


def _html_cell(cell: Shown) -> str:
    interval = f' <span class="ci">{esc(cell.interval)}</span>' if cell.interval else ""
    return f'<td class="n {cell.tone}">{esc(cell.value)}{interval}</td>'


def render_markdown(ablation: Ablation) -> str:
    """The header and every study's table (the reuse study's sentence) in GitHub Markdown."""
    tasks = ", ".join(md(t) for t in ablation.tasks) or "none"
    lines = [
        f"### kiln ablation: {len(ablation.studies)} stud{'y' if len(ablation.studies) == 1 else 'ies'}",
        "",
        f"{len(ablation.tasks)} tasks ({tasks}), budget {ablation.budget}, {ablation.repeat} repeats, "
        f"wall time {fmt_duration(ablation.seconds)}. Figures: {md(ablation.figures or 'as measured')}.",
        "",
    ]
    for study in ablation.studies:
        lines += [f"#### {md(study.name)}: {md(study.question)}", ""]
        if study.metric == "reuse":
            lines += [md(reuse_line(study, len(ablation.tasks))), ""]
        elif study.arms:
            lines += [*_md_table(table(study, ablation.floor)), ""]
    lines.append("Intervals are 95% over the repeats; **bold**: a ratio whose interval excludes 1.")
    return "\n".join(lines) + "\n"


def _md_table(t: Table) -> list[str]:
    out = ["| " + " | ".join(t.head) + " |", "| --- | --- |" + " ---: |" * (len(t.head) - 2)]
    for row in t.rows:
        label = md(row.label) if row.kind == "arm" else f"_{md(row.label)}_"
        cells = [f"**{c}**" if c.tone else str(c) for c in row.cells]
        out.append(f"| {label} | {md(row.memory)} | " + " | ".join(cells) + " |")
    return out
