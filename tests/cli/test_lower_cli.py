"""`kiln lower` as a user runs it: the generated candidate, its summary, --check, --json, and what it refuses."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kernelkiln.cli import lower as lower_cli
from kernelkiln.testing.cli import command_app, kiln
from kernelkiln.testing.tasks import TASKS

RELU = str(TASKS / "tiny_relu.py")  # no KILN start, elementwise: kernelkiln lowers it


@pytest.fixture
def app():
    return command_app(lower_cli.register)


@pytest.fixture
def unlowerable():
    return TASKS / "tiny_sort.py"  # kernelkiln cannot lower aten.sort


def test_lower_with_out_and_check_writes_a_knobbed_candidate_the_guard_judges_correct(tmp_path):
    out = tmp_path / "relu_seed.py"
    done = kiln("lower", RELU, "--out", str(out), "--check", "--threads", "1")
    assert done.returncode == 0, done.stderr
    source = out.read_text()
    assert "KNOBS = {" in source and "class ModelNew" in source
    assert done.stdout == ""  # the source went to the file
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1, done.stderr
    assert line.startswith("kiln: starting candidate for tiny_relu: ") and "loop nest(s)" in line and "knobs " in line
    assert "the guard judges it correct" in line and f"written to {out}" in line


def test_lower_without_out_writes_the_source_to_stdout_and_the_summary_to_stderr(app):
    done = CliRunner().invoke(app, ["lower", RELU, "--threads", "1"], catch_exceptions=False)
    assert done.exit_code == 0, done.stderr
    assert (
        "KNOBS = {" in done.stdout and "class ModelNew" in done.stdout and "kiln: starting candidate" not in done.stdout
    )
    assert done.stderr.startswith("kiln: starting candidate for tiny_relu: ")
    assert "judges" not in done.stderr and "written to" not in done.stderr  # no --check, no --out


def test_lower_json_prints_the_summary_with_the_source_when_there_is_no_out(app):
    done = CliRunner().invoke(app, ["lower", RELU, "--threads", "1", "--json"], catch_exceptions=False)
    assert done.exit_code == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"task", "kernels", "kinds", "knobs", "ops", "source"}  # no check, no out asked for
    assert out["task"] == "tiny_relu" and out["kernels"] >= 1 and len(out["kinds"]) >= 1
    assert "THREADS" in out["knobs"] and "relu" in " ".join(out["ops"])
    assert "KNOBS = {" in out["source"] and "class ModelNew" in out["source"]


def test_lower_json_with_out_names_the_file_instead_of_printing_the_source(app, tmp_path):
    path = tmp_path / "seed.py"
    done = CliRunner().invoke(
        app, ["lower", RELU, "--threads", "1", "--json", "--out", str(path)], catch_exceptions=False
    )
    assert done.exit_code == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["out"] == str(path) and "source" not in out and "class ModelNew" in path.read_text()


def test_lower_of_an_unlowerable_task_is_one_line_naming_the_operation_and_exit_2(unlowerable):
    done = kiln("lower", str(unlowerable), "--threads", "1")
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr.strip()
        == f"kiln: error: {unlowerable}: cannot generate a starting candidate: no lowering yet for aten.sort"
    )
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_lower_help_teaches_check_out_and_an_example():
    done = kiln("lower", "--help")
    assert done.returncode == 0, done.stderr
    for word in ("--check", "--out", "--json", "--threads", "Examples", "kiln lower"):
        assert word in done.stdout, word


def test_seed_the_earlier_name_of_lower_still_runs_it_and_is_not_listed():
    done = kiln("seed", RELU, "--threads", "1")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("kiln: starting candidate for tiny_relu: ")
    commands = [line.split()[1] for line in kiln("--help").stdout.splitlines() if line.startswith("│ ")]
    assert "lower" in commands and "seed" not in commands
