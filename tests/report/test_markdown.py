"""Markdown for issues: a table row per task, a line per task, inert summaries."""

from __future__ import annotations

from dataclasses import replace

from kernelkiln.report import collect, render_markdown
from kernelkiln.report.records import TaskReport
from kernelkiln.store import open_store


def markdown(url, *targets, edit=None):
    store = open_store(url)
    try:
        report = collect(list(targets), store)
    finally:
        store.close()
    return render_markdown(edit(report) if edit else report)


def test_the_table_has_a_row_per_task_and_a_line_per_task(stored):
    url, run_id, _, _ = stored
    text = markdown(url, run_id)
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 3 and rows[1].startswith("| softmax | **0.90x** | 0.50x | 1.80x | 5 | 2 | 1 | 1 | 1 |")
    assert "- **row\\_sum**: 1.50x vs torch (1.50x over the starting candidate) after 2 attempts" in text
    assert "SOL: not available (run `kiln machine`)" in text


def test_summaries_cannot_break_the_table_or_inject_html(stored):
    url, run_id, _, _ = stored

    def hostile(report):
        run = report.runs[0]
        task = replace(run.tasks[0], best_summary="a | b <img src=x onerror=alert(1)>\nnext")
        return replace(report, runs=(replace(run, tasks=(task, *run.tasks[1:])),))

    text = markdown(url, run_id, edit=hostile)
    assert "a \\| b &lt;img src=x onerror=alert(1)&gt; next" in text and "<img" not in text


def test_a_task_that_never_started_says_so(stored):
    url, run_id, _, _ = stored

    def unstarted(report):
        run = report.runs[0]
        idle = TaskReport(task_id="matmul", best_speedup=None, start_speedup=None, attempts=0, verdicts={})
        return replace(report, runs=(replace(run, tasks=(*run.tasks, idle)),))

    text = markdown(url, run_id, edit=unstarted)
    assert "- **matmul**: not started" in text and "| matmul | — |" in text


def test_a_task_the_model_gave_no_candidate_says_why(start_only):
    text = markdown(*start_only)
    assert (
        "- **softmax**: no candidate from the model: a1 stopped after 3 turns in a row without a candidate; "
        "the last turn: the model answered 3 times in text without a usable python block "
        "(the starting candidate alone: 0.50x vs torch)"
    ) in text


def test_a_sol_cell_names_the_bound_and_the_rate_reached(stored):
    url, run_id, _, _ = stored

    def with_sol(report):
        run = report.runs[0]
        tasks = (replace(run.tasks[0], sol_fraction=0.42, reached="memory-bound, 12.3 GB/s"), *run.tasks[1:])
        return replace(report, runs=(replace(run, tasks=tasks),))

    text = markdown(url, run_id, edit=with_sol)
    assert "| 42% (memory-bound, 12.3 GB/s) |" in text
