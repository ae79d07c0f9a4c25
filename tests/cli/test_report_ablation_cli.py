"""`kiln report` on an output DIR of `kiln ablate`: the page and its path, --out, Markdown, one-line refusals."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelkiln.testing.cli import kiln

FIXTURE = Path(__file__).parents[1] / "report" / "data" / "ablation.json"


@pytest.fixture
def ablation_dir(tmp_path):
    folder = tmp_path / "abl"
    folder.mkdir()
    shutil.copy(FIXTURE, folder / "ablation.json")
    return folder


def test_help_mentions_ablation_directories():
    done = kiln("report", "--help")
    assert done.returncode == 0 and "kiln ablate" in done.stdout and "ablation.json" in done.stdout


def test_an_ablation_dir_gets_its_page_in_the_dir_and_the_path_printed(ablation_dir, tmp_path):
    done = kiln("report", str(ablation_dir), "--store", f"sqlite:///{tmp_path / 'unused.db'}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(ablation_dir / "report.html")
    html = (ablation_dir / "report.html").read_text()
    assert html.startswith("<!doctype html>") and '<h2 id="study-rules">' in html and "<svg" in html
    assert "<script" not in html and not (tmp_path / "unused.db").exists()  # no store needed


def test_out_puts_an_ablation_page_where_asked(ablation_dir, tmp_path):
    out = tmp_path / "pages" / "ablation.html"
    done = kiln("report", str(ablation_dir / "ablation.json"), "--out", str(out))
    assert done.returncode == 0 and done.stdout.strip() == str(out) and '<h2 id="study-context">' in out.read_text()
    assert not (ablation_dir / "report.html").exists()


def test_markdown_of_an_ablation_dir_prints_its_tables(ablation_dir):
    done = kiln("report", str(ablation_dir), "--markdown")
    assert done.returncode == 0, done.stderr
    assert "#### rules:" in done.stdout and "| _random rules / memory_ |" in done.stdout
    assert not (ablation_dir / "report.html").exists()


def test_a_dir_with_neither_run_json_nor_ablation_json_is_refused_in_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    done = kiln("report", str(tmp_path / "empty"), "--store", f"sqlite:///{tmp_path / 'kiln.db'}")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "no run.json or ablation.json" in done.stderr and "kiln ablate" in done.stderr


def test_an_ablation_dir_among_other_targets_is_refused_in_one_line(ablation_dir):
    done = kiln("report", str(ablation_dir), "r-3f9c0a1b2c3d4e5f")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "reported on its own" in done.stderr
