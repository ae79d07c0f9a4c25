"""The HTML page: self-contained, escaped, and showing what the run has (and saying what it lacks)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from kernelkiln.report import collect, render_html
from kernelkiln.report.html import NO_SOL, VERDICT_MEANING
from kernelkiln.store import open_store

from .conftest import HOSTILE


@pytest.fixture
def report(stored):
    url, run_id, _, _ = stored
    store = open_store(url)
    try:
        return collect([run_id], store)
    finally:
        store.close()


def test_the_page_is_one_file_with_no_scripts_and_no_external_assets(report):
    page = render_html(report)
    assert page.startswith("<!doctype html>") and "<style>" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.IGNORECASE)
    assert not re.search(r"<script|<link|<img|<iframe|@import|url\(", page, re.IGNORECASE)


def test_the_page_names_every_task_draws_charts_and_explains_the_verdicts(report):
    page = render_html(report)
    for task in ("softmax", "row_sum"):
        assert f'id="r-test-{task}"' in page
    assert page.count("<svg") >= 6  # bars, growth, and a trajectory and a graph per task
    for verdict, meaning in VERDICT_MEANING.items():
        assert verdict in page and meaning.replace("'", "&#x27;") in page
    assert "x vs torch" in page and "attempt # (in the order the guard judged them)" in page


def test_a_hostile_summary_appears_escaped(report):
    page = render_html(report)
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>always</b>" not in page  # rule text is escaped too


def test_sol_bars_appear_only_with_recorded_fractions(report):
    assert NO_SOL in render_html(report)
    run = report.runs[0]
    tasks = (replace(run.tasks[0], sol_fraction=0.42, reached="memory-bound, 12.3 GB/s"), *run.tasks[1:])
    page = render_html(replace(report, runs=(replace(run, tasks=tasks),)))
    assert NO_SOL not in page and "42%" in page and "speed of light" in page
    assert f"{run.tasks[0].task_id} (memory-bound, 12.3 GB/s)" in page  # the bound and the rate reached on it


def test_drafting_and_the_best_path_are_marked(report):
    page = render_html(report)
    assert "a2 drafts" in page and "drafting starts" in page and "path to the best" in page


def test_a_run_without_stored_history_says_what_is_unavailable(stored, tmp_path):
    _, _, out, _ = stored
    store = open_store(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        page = render_html(collect([str(out)], store, allow_missing=True))
    finally:
        store.close()
    assert "softmax" in page and "0.90x" in page and "unavailable" in page
    assert "trajectory and attempt graph: not available" in page


def test_several_runs_share_one_page_with_a_comparison_table(stored, report):
    url, run_id, out, _ = stored
    store = open_store(url)
    try:
        page = render_html(collect([run_id, str(out)], store))
    finally:
        store.close()
    assert "2 runs" in page and "range" in page and page.count("<h2>Run r-test</h2>") == 2


def test_a_task_that_ran_out_of_candidates_shows_its_attempts_of_the_budget(report):
    page = render_html(report)
    assert "2 of 5:" in page and "5 of 5" not in page  # row_sum stopped early, softmax used its budget
    assert "ran out of candidates before the budget" in page


def test_a_task_the_model_gave_no_candidate_says_why(start_only):
    url, run_id = start_only
    store = open_store(url)
    try:
        page = render_html(collect([run_id], store))
    finally:
        store.close()
    assert '<p class="note">no candidate from the model: a1 stopped after 3 turns in a row' in page
