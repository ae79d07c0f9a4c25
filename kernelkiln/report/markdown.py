"""The report in GitHub Markdown, for pasting into issues: the suite table and a line per task."""

from __future__ import annotations

from kernelkiln.report.format import fmt_date, fmt_duration, fmt_pct, fmt_tokens, fmt_verdicts, fmt_x
from kernelkiln.report.records import Report, RunReport

_SPECIAL = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "`": "\\`",
        "*": "\\*",
        "_": "\\_",
        "[": "\\[",
        "]": "\\]",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
        "\n": " ",
        "\r": " ",
    }
)


def md(text: object) -> str:
    """Text made inert in Markdown (and in the HTML GitHub lets through); one line."""
    return str(text).translate(_SPECIAL)


def render(report: Report) -> str:
    """Every run's table and task lines."""
    return "\n\n".join(render_run(run) for run in report.runs) + "\n"


def render_run(run: RunReport) -> str:
    """One run: a heading, the suite table, a line per task."""
    took = f", took {fmt_duration(run.wall_s)}" if run.wall_s is not None else ""
    lines = [f"### kiln run `{md(run.run_id)}`: {md(run.status)}, {fmt_date(run.created_at)}{took}", ""]
    if run.note:
        lines += [f"_{md(run.note)}_", ""]
    sol = run.has_sol
    searched = run.confirmed
    lines.append(
        f"| task | best vs torch |{' in search |' if searched else ''} start vs torch | best / start | attempts "
        f"| KEEP | ACCEPT | REVERT | REJECT | tokens |{' SOL |' if sol else ''}"
    )
    lines.append(
        "| --- | ---: |" + (" ---: |" if searched else "") + " ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |" + (" ---: |" if sol else "")
    )
    for t in run.tasks:
        counts = " | ".join(str(t.verdicts.get(v, 0)) for v in ("KEEP", "ACCEPT", "REVERT", "REJECT"))
        best = f"**{fmt_x(t.best_speedup)}**" if t.best_speedup is not None else "—"
        search = f" {fmt_x(t.search_speedup)} |" if searched else ""
        lines.append(
            f"| {md(t.task_id)} | {best} |{search} {fmt_x(t.start_speedup)} | "
            f"{fmt_x(t.best_over_start)} | {t.attempts} | {counts} | {fmt_tokens(t.tokens)} |"
            + (f" {fmt_pct(t.sol_fraction)}{f' ({md(t.reached)})' if t.reached else ''} |" if sol else "")
        )
    lines.append("")
    for t in run.tasks:
        if t.status != "evaluated":
            start = f" (the starting candidate alone: {fmt_x(t.start_speedup)} vs torch)" if t.attempts else ""
            lines.append(f"- **{md(t.task_id)}**: {md(t.status)}: {md(t.reason)}{start}")
            continue
        if not t.attempts:
            lines.append(f"- **{md(t.task_id)}**: not started")
            continue
        if t.best_speedup is None:
            lines.append(
                f"- **{md(t.task_id)}**: no correct candidate in {t.attempts} attempts ({fmt_verdicts(t.verdicts)})"
            )
            continue
        over = f" ({fmt_x(t.best_over_start)} over the starting candidate)" if t.best_over_start is not None else ""
        change = f"; best: {md(t.best_summary)}" if t.best_summary else ""
        notes = "".join(f"; {md(n)}" for n in (t.adoption_note, t.tier_note) if n)
        lines.append(
            f"- **{md(t.task_id)}**: {fmt_x(t.best_speedup)} vs torch{over} after {t.attempts} attempts "
            f"({fmt_verdicts(t.verdicts)}){change}{notes}"
        )
    if searched:
        lines += [
            "",
            "best vs torch: the best judged again with a longer timing budget when its task ended; "
            "in search: as the search measured it.",
        ]
    if not sol:
        lines += ["", "SOL: not available (run `kiln machine`)"]
    return "\n".join(lines)
