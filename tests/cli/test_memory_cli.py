import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kernelkiln.cli import memory as memory_cli
from kernelkiln.errors import UserError
from kernelkiln.memory import Memory
from kernelkiln.store import open_store
from kernelkiln.store.records import Experience
from kernelkiln.store.schema import SCHEMA_VERSION
from kernelkiln.testing.cli import command_app
from kernelkiln.testing.memory_fakes import attempt, result


@pytest.fixture
def app():
    return command_app(memory_cli.register)


@pytest.fixture
def url(tmp_path):
    url = f"sqlite:///{tmp_path / 'kiln.db'}"
    store = open_store(url)
    memory = Memory(store)
    memory.add_experience(
        Experience(id="e-acc", text="Use four accumulators in row reductions.", platform="cpu", op_family="reduction")
    )
    memory.add_experience(
        Experience(id="e-tile", text="Tile the matmul by 64 for cache reuse.", platform="cpu", op_family="matmul")
    )
    root = attempt("row_sum", verdict="KEEP", time_ms=1.0, summary="naive", journal="# naive loop", created_at=1.0)
    child = attempt(
        "row_sum", verdict="KEEP", time_ms=0.5, speedup=2.0, parent=root, summary="4 accumulators", created_at=2.0
    )
    bad = attempt("row_sum", verdict="REJECT", parent=root, summary="avx512", error_class="build", created_at=3.0)
    for judged in (result(root), result(child, adopted=["e-acc"], unadopted=["e-tile"]), result(bad)):
        memory.callbacks.after_verdict(judged)
    memory.callbacks.on_task_end(root.task_id, [""])
    store.close()
    return url, root, child


def run(app, *args):
    outcome = CliRunner().invoke(app, ["memory", *args], catch_exceptions=True)
    if outcome.exception and not isinstance(outcome.exception, SystemExit):
        raise outcome.exception
    assert outcome.exit_code == 0, outcome.output
    return outcome.output


def run_json(app, *args):
    return json.loads(run(app, *args, "--json"))


def test_stats(app, url):
    data = run_json(app, "stats", "--store", url[0])
    # Two experiences stored by hand, and the lesson of the child, a new best derived from its parent.
    assert (data["attempts"], data["experiences"], data["stages"], data["schema_version"]) == (3, 3, 2, SCHEMA_VERSION)
    assert "attempts" in run(app, "stats", "--store", url[0])


def test_search_ranks_and_filters(app, url):
    data = run_json(app, "search", "accumulators row reduction", "--store", url[0], "--kind", "experience")
    found = [r["id"] for r in data["results"]]
    assert found[0] == "e-acc" and "e-tile" not in found
    knowledge = run_json(
        app, "search", "avx2 intrinsics horizontal sum", "--store", url[0], "--platform", "cpu", "--kind", "knowledge"
    )
    assert knowledge["results"] and all(r["kind"] == "knowledge" for r in knowledge["results"])
    assert run(app, "search", "zzzz", "--store", url[0]).strip() == "no match"


def test_show_experience_and_attempt(app, url):
    exp = run_json(app, "show", "e-acc", "--store", url[0])
    assert exp["type"] == "experience" and exp["experience"]["adoptions"] == 1
    assert exp["adoptions"][0]["adopted"] is True
    att = run_json(app, "show", url[1].id, "--store", url[0])
    assert att["attempt"]["journal"] == "# naive loop"
    assert "naive loop" in run(app, "show", url[1].id, "--store", url[0])


def test_unknown_id_and_bad_url_are_user_errors(app, url):
    with pytest.raises(UserError, match="no experience"):
        run(app, "show", "e-missing", "--store", url[0])
    with pytest.raises(UserError, match="bad store URL"):
        run(app, "stats", "--store", "mysql://u@h/db")
    with pytest.raises(UserError, match="no attempts"):
        run(app, "graph", "no_such_task", "--store", url[0])


def test_kiln_prints_user_errors_as_one_line_with_exit_2(url):
    code = "import sys; from kernelkiln.cli.app import main; sys.argv = ['kiln', *sys.argv[1:]]; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "memory", "show", "e-missing", "--store", url[0]],
        capture_output=True,
        text=True,
        env={**os.environ, "KILN_STORE": url[0]},
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["kiln: error: no experience, rule or attempt with id 'e-missing'"]


def test_graph_marks_the_best_path(app, url):
    _, root, child = url
    data = run_json(app, "graph", "row_sum", "--store", url[0])
    assert data["best_path"] == [root.id, child.id]
    text = run(app, "graph", "row_sum", "--store", url[0])
    lines = text.splitlines()
    assert lines[0].startswith(f"* {root.id} KEEP")
    assert f"* {child.id}" in lines[1] and lines[1].endswith("← best")
    assert "REJECT" in lines[2] and "*" not in lines[2].split("a-")[0]


def test_board_and_rules(app, url):
    board = run_json(app, "board", "row_sum", "--store", url[0])
    assert [e["kind"] for e in board["entries"]] == ["win", "win", "trap"]
    assert run_json(app, "rules", "--store", url[0]) == {"rules": []}
    assert run(app, "board", "other", "--store", url[0]).strip() == "no board entries for other"


def test_export_import_round_trip(app, url, tmp_path):
    out = tmp_path / "memory.jsonl"
    exported = run_json(app, "export", str(out), "--store", url[0])
    assert exported["records"]["attempt"] == 3
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    first = run_json(app, "import", str(out), "--store", target)
    assert first["added"] == exported["records"]
    assert run_json(app, "import", str(out), "--store", target)["added"] == {}
    assert run_json(app, "stats", "--store", target)["attempts"] == 3
    assert (
        run_json(app, "show", "e-acc", "--store", target)["experience"]["q"]
        == run_json(app, "show", "e-acc", "--store", url[0])["experience"]["q"]
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "attempt", "data": {}}\n')
    with pytest.raises(UserError, match=r"bad\.jsonl:1"):
        run(app, "import", str(bad), "--store", target)


def test_prune_help_says_what_it_prunes(app):
    text = " ".join(CliRunner().invoke(app, ["memory", "prune", "--help"]).output.split())
    assert "board entries older than each task's latest 16" in text
    assert "never adopted" in text


def test_prune(app, url):
    assert run_json(app, "prune", "--dry-run", "--store", url[0]) == {
        "dry_run": True,
        "board_entries": 0,
        "experiences": [],
    }
    assert "removed 0 board entries" in run(app, "prune", "--store", url[0])
