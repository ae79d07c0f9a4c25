"""An ablation's page and Markdown: a section per study, intervals, forest plots, reach curves, tables."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernelkiln.errors import UserError
from kernelkiln.report.ablation import render_html, render_markdown
from kernelkiln.report.ablation_data import Cell, parse, ratio, show
from kernelkiln.report.sources import read_ablation_json

from .conftest import HOSTILE

FIXTURE = Path(__file__).parent / "data" / "ablation.json"


@pytest.fixture
def raw():
    """ablation.json's object: memory (a k = 1 ratio, a null figure), rules (3 arms), reuse, context (tokens)."""
    return json.loads(FIXTURE.read_text())


def page(raw) -> str:
    return render_html(parse(Path("/runs/abl"), raw))


def section(html: str, study: str) -> str:
    """The study's part of the page, from its heading to the next one."""
    start = html.index(f'<h2 id="study-{study}">')
    end = html.find("<h2", start + 1)
    return html[start : end if end > 0 else len(html)]


def plots(html: str, study: str) -> list[str]:
    return re.findall(r"<svg.*?</svg>", section(html, study), re.S)


def test_each_study_has_a_section_with_every_arms_label_and_its_formatted_interval(raw):
    html = page(raw)
    for study in ("memory", "rules", "reuse", "context"):
        assert f'<h2 id="study-{study}">' in html and raw["studies"][study]["question"].replace("'", "&#x27;") in html
    rules = section(html, "rules")
    for label, interval in (("memory", "[1.38, 1.95]"), ("no rules", "[1.29, 1.79]"), ("random rules", "[1.33, 1.92]")):
        assert f"<b>{label}</b>" in rules and interval in rules
    assert "no rules / memory" in rules and "random rules / memory" in rules and "memory / memory" not in rules
    assert "anytime / best-of-N" in rules and "best-of-N" in rules


def test_the_header_gives_tasks_budget_repeats_consensus_and_the_studies_total_wall_time(raw):
    head = page(raw).split("<h2", 1)[0]
    assert all(f"<code>{t}</code>" in head for t in raw["tasks"])
    assert "budget 5 evaluations per task" in head and "3 repeat(s)" in head
    assert "median of its measurements across the ablation" in head
    assert "wall time 94.9 min" in head  # 1840 + 2750.4 + 1020.6 + 83 s


def test_the_forest_plot_draws_a_whisker_per_finite_interval_and_none_for_k_1(raw):
    html = page(raw)
    forest, _ = plots(html, "rules")
    assert forest.count('class="ci"') == 6  # 2 arms x 3 figures
    forest, _ = plots(html, "memory")
    assert forest.count('class="ci"') == 2 and forest.count("<circle") == 3  # evals to 95%: k = 1, a point only
    assert "k = 1, no interval" in forest and "&lt; 1 better" in forest and "log scale" in forest


def test_the_reach_curves_draw_a_line_per_arm_and_the_floor_dashed(raw):
    _, curves = plots(page(raw), "rules")
    lines = re.findall(r"<polyline[^>]*>", curves)
    assert len(lines) == 4 and [("stroke-dasharray" in line) for line in lines] == [False] * 3 + [True]
    assert all(label in curves for label in ("memory", "no rules", "random rules", "best-of-N"))


def test_an_arm_without_a_reach_curve_draws_no_line_and_the_legend_says_so(raw):
    raw["studies"]["rules"]["arms"][1]["reach"] = []
    del raw["floor"]
    _, curves = plots(page(raw), "rules")
    assert curves.count("<polyline") == 2 and "no rules (no curve)" in curves and "best-of-N" not in curves


def test_a_token_study_has_its_table_and_no_plots(raw):
    context = section(page(raw), "context")
    assert "<svg" not in context
    assert "prompt tokens per run" in context and "61.2K" in context and "[58.0K, 64.6K]" in context
    assert "passive / active" in context and "2.43x" in context


def test_the_reuse_study_is_a_sentence_and_a_bar_per_repeat(raw):
    reuse = section(page(raw), "reuse")
    assert (
        "The second pass needed 1.4 [1.0, 1.9] evaluations per task to reach 95% of the first pass&#x27;s best "
        "(in a budget of 3"
    ) in reuse
    assert "reached in one evaluation: 2, 3, 1 of 3 tasks" in reuse
    assert reuse.count("<svg") == 1 and reuse.count("<rect") == 4  # the legend's swatch and a bar per repeat


def test_ratios_whose_interval_excludes_1_are_toned_by_which_side_is_better(raw):
    rules = section(page(raw), "rules")
    assert '<td class="n worse">0.90x' in rules and '<td class="n worse">1.19x' in rules  # slower, more evaluations
    assert '<td class="n ">0.93x' in rules
    assert ratio(Cell(0.8, 0.7, 0.9, 3), "evals_to_95").tone == "better"


def test_k_1_shows_the_mean_alone_and_a_null_figure_a_dash():
    assert str(show(Cell(1.2345, None, None, 1), "speedup")) == "1.23x"
    assert str(show(Cell(2.5, 2.0, 3.0, 4), "evals_to_95")) == "2.5 [2.0, 3.0]"
    assert str(show(Cell.of(None), "speedup")) == "—"
    assert Cell.of({"mean": 1.5, "ci95": [1.2, 1.8], "k": 1}).interval is None


def test_a_null_figure_reads_as_a_dash_in_its_table(raw):
    memory = section(page(raw), "memory")
    row = re.search(r'<tr class="arm"><td><b>empty store</b>.*?</tr>', memory).group(0)
    assert row.count("—") == 1


def test_the_page_has_no_scripts_and_labels_are_escaped(raw):
    raw["studies"]["rules"]["arms"][2]["arm"] = HOSTILE
    html = page(raw)
    assert "<script" not in html and "&lt;script&gt;" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.IGNORECASE)


def test_markdown_prints_the_header_and_every_tables_rows(raw):
    text = render_markdown(parse(Path("/runs/abl"), raw))
    assert text.startswith("### kiln ablation: 4 studies") and "29\\_Softmax" in text and "94.9 min" in text
    no_rules = "| no rules | crossfit | 1.52x [1.29, 1.79] | 1.18x [1.01, 1.38] | 3.1 [2.4, 4.0] | 1.12x [0.97, 1.30] |"
    assert no_rules in text
    assert "| _memory / empty store_ |  | **1.23x [1.07, 1.42]** | **1.20x [1.02, 1.41]** | 0.71x |  |" in text
    assert "| passive | empty | 148.8K [139.0K, 159.3K] | 14.9K [14.2K, 15.7K] |" in text
    assert "The second pass needed 1.4 \\[1.0, 1.9\\] evaluations" in text and "<svg" not in text


def test_an_ablation_json_without_studies_is_refused(tmp_path):
    (tmp_path / "ablation.json").write_text('{"budget": 3}')
    with pytest.raises(UserError, match="no studies"):
        read_ablation_json(str(tmp_path))
    assert read_ablation_json(str(tmp_path / "elsewhere")) is None
