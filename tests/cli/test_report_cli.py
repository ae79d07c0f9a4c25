"""`kiln report` as a user runs it: the HTML file and its path, Markdown, one-line errors, a real run."""

from __future__ import annotations

import json
import re

from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.store import open_store
from kernelkiln.testing.cli import kiln
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.tasks import TASKS


def test_help_names_the_inputs_and_outputs():
    done = kiln("report", "--help")
    assert done.returncode == 0
    for word in ("RUN|DIR", "--out", "--markdown", "--store", "run.json"):
        assert word in done.stdout


def test_unknown_run_and_a_dir_without_run_json_exit_2_with_one_line(tmp_path):
    store = f"sqlite:///{tmp_path / 'kiln.db'}"
    done = kiln("report", "r-nope", "--store", store)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no run 'r-nope'" in done.stderr
    (tmp_path / "empty").mkdir()
    done = kiln("report", str(tmp_path / "empty"), "--store", store)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no run.json" in done.stderr


def test_a_dir_whose_run_is_not_in_the_store_exits_2_unless_allow_missing(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    task = {"best_speedup": 1.2, "seed_speedup": 1.0, "attempts": 1, "verdicts": {"KEEP": 1}}
    (out / "run.json").write_text(json.dumps({"run_id": "r-gone", "status": "done", "tasks": {"t": task}}))
    store = f"sqlite:///{tmp_path / 'kiln.db'}"
    done = kiln("report", str(out), "--store", store, "--markdown")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "r-gone" in done.stderr and "kiln.db" in done.stderr and "--allow-missing" in done.stderr
    done = kiln("report", str(out), "--store", store, "--markdown", "--allow-missing")
    assert done.returncode == 0, done.stderr
    assert "kiln: run r-gone: read from" in done.stderr and "run.json alone" in done.stderr
    assert "unavailable" in done.stdout


def test_a_real_run_reported_from_its_dir_and_as_markdown(tmp_path):
    url = f"sqlite:///{tmp_path / 'kiln.db'}"
    store = open_store(url)
    try:
        result = Optimizer(Memory(store), tmp_path).start(
            [TaskSpec(str(TASKS / "tiny_softmax.py"), {})],
            OptimizeConfig(guard=fast_config(), budget=3),
            tmp_path / "out",
        )
    finally:
        store.close()
    assert result.started_at and result.ended_at and result.started_at <= result.ended_at
    assert result.wall_s is not None
    done = kiln("report", str(tmp_path / "out"), "--store", url)
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"kiln: run {result.run_id}: read from store {url}\n"
    page_path = tmp_path / "out" / "report.html"
    assert done.stdout.strip() == str(page_path)
    page = page_path.read_text()
    assert result.run_id in page and "tiny_softmax" in page and "<svg" in page and "KEEP" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.IGNORECASE) and "<script" not in page
    confirmed = result.tasks["tiny_softmax"].confirmed_speedup
    assert "best in search" in page and f"best {confirmed:.2f}x vs torch when judged again" in page
    assert "no model tokens (offline tuner)" in page

    done = kiln("report", result.run_id, "--store", url, "--markdown")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^\| tiny\\_softmax \| \*\*\d+\.\d\dx\*\* \| \d+\.\d\dx \|", done.stdout, re.MULTILINE)
    assert "in search: as the search measured it" in done.stdout

    done = kiln("report", result.run_id, "--store", url, cwd=tmp_path)
    assert done.returncode == 0 and (tmp_path / f"kiln-report-{result.run_id}.html").is_file()
