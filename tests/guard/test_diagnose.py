"""Diagnostics an agent may ask for: checks, a short profile and the compiler's vectorization report."""

from __future__ import annotations

import ast
import dataclasses

import pytest

from kernelkiln import native
from kernelkiln.guard import GuardSession
from kernelkiln.guard import diagnose as D
from kernelkiln.task import load_task
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.tasks import TASKS

SOFTMAX = (CANDIDATES / "softmax_c.py").read_text()
KNOBBED = (CANDIDATES / "softmax_knobs.py").read_text()
WRONG = SOFTMAX.replace("yr[c] /= s", "yr[c] /= (s + 1.0f)")
IMPORTS_OS = "import os\n" + SOFTMAX
BROKEN = SOFTMAX.replace("float m = -INFINITY, s = 0.0f;", "float m = -INFINITY s = 0.0f;")


def native_source(candidate: str) -> str:
    """The ``SOURCE = r\"\"\"…\"\"\"`` literal of a candidate file."""
    tree = ast.parse(candidate)
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "SOURCE")
    return ast.literal_eval(node.value)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """One guard for the whole module, building into a private, initially empty native cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KILN_CACHE_DIR", str(tmp_path_factory.mktemp("native-cache")))
        with GuardSession(load_task(TASKS / "tiny_softmax.py"), fast_config()) as guard:
            yield guard


def test_the_diagnoser_runs_each_tool_by_name_and_names_an_unknown_one(session):
    run = D.diagnoser(session, profile_budget_s=0.5)
    assert list(D.TOOLS) == ["run_checks", "profile", "vectorization_report"]
    assert run("run_checks", IMPORTS_OS) == D.check_report(session, IMPORTS_OS)
    assert run("profile", IMPORTS_OS).startswith("FAIL at gate")
    assert run("vectorization_report", IMPORTS_OS).startswith("no native code was built")
    assert run("format_disk", SOFTMAX) == "unknown diagnostic 'format_disk'"


# -- run_checks ----------------------------------------------------------------------------
def test_check_report_passes_a_correct_candidate(session):
    report = D.check_report(session, SOFTMAX)
    assert report.startswith("PASS")
    assert "2 workload(s)" in report and f"{session.config.check_trials} trials" in report


def test_check_report_fails_a_wrong_candidate_with_the_mismatch_detail(session):
    report = D.check_report(session, WRONG)
    assert report.startswith("FAIL at check:")
    assert "outside tolerance" in report and "expected" in report and "got" in report


def test_check_report_fails_a_candidate_importing_os_at_the_gate(session):
    report = D.check_report(session, IMPORTS_OS)
    first, *details = report.splitlines()
    assert first.startswith("FAIL at gate:") and "'os'" in first
    assert details and "line 1" in details[0]


def test_check_report_names_the_candidate_line_of_a_compile_error(session):
    report = D.check_report(session, BROKEN)
    assert report.startswith("FAIL at build")
    broken_line = 1 + next(i for i, line in enumerate(BROKEN.splitlines()) if "-INFINITY s" in line)
    assert f"error line {broken_line}:" in report


# -- profile ---------------------------------------------------------------------------------
def test_profile_report_lists_each_workload_with_its_speedup(session):
    report = D.profile_report(session, SOFTMAX, budget_s=0.5)
    head, *rows = report.splitlines()
    assert "geometric-mean speedup" in head
    assert [row.split(":")[0] for row in rows] == [w.name for w in session.task.workloads]
    assert all("speedup" in row and "t_ref" in row and "t_cand" in row for row in rows)


def test_profile_report_of_a_failing_candidate_says_where_it_failed(session):
    assert D.profile_report(session, IMPORTS_OS, budget_s=0.5).startswith("FAIL at gate")


# -- vectorization report --------------------------------------------------------------------
def assert_vectorization_remarks(report: str) -> None:
    head, *remarks = report.splitlines()
    assert head.startswith("build 1 (flags: defaults): ok,") and "remark(s)" in head
    count = int(head.split(", ")[-1].split()[0])
    assert count > 0 and len(remarks) == min(count, 60) + (count > 60)
    assert any("missed" in r or "optimized" in r for r in remarks)


def test_vectorization_report_lists_the_compilers_remarks(session):
    assert_vectorization_remarks(D.vectorization_report(session, SOFTMAX))


def test_vectorization_report_is_the_same_when_the_traced_build_comes_from_the_cache(session):
    first = D.vectorization_report(session, SOFTMAX)
    second = D.vectorization_report(session, SOFTMAX)
    (request,) = session.native_requests(SOFTMAX)
    traced = dataclasses.replace(request, flags=(*request.flags, "-fopt-info-vec-optimized", "-fopt-info-vec-missed"))
    assert session.build_as_sandbox(traced).cached  # the second report was served from the cache
    assert_vectorization_remarks(second)
    assert second == first


def test_vectorization_report_names_the_candidates_own_flags(session):
    report = D.vectorization_report(session, KNOBBED)
    assert report.startswith("build 1 (flags: -O2): ok,")


def test_vectorization_report_of_a_candidate_that_builds_nothing_says_so(session):
    assert D.vectorization_report(session, IMPORTS_OS).startswith("no native code was built")


# -- the session underneath ------------------------------------------------------------------
def test_untimed_evaluation_accepts_a_correct_candidate_at_the_check_stage(session):
    verdict = session.evaluate(SOFTMAX, timed=False)
    assert (verdict.verdict, verdict.stage, verdict.correct, verdict.timed) == ("ACCEPT", "check", True, False)
    assert verdict.workloads == [] and verdict.speedup is None


def test_untimed_evaluation_still_rejects_a_wrong_candidate(session):
    verdict = session.evaluate(WRONG, timed=False)
    assert (verdict.verdict, verdict.stage) == ("REJECT", "check")


def test_native_requests_returns_the_candidates_build_request(session):
    assert session.native_requests(SOFTMAX) == [native.BuildRequest(native_source(SOFTMAX), "c", ())]


def test_native_requests_carries_the_candidates_flags(session):
    assert session.native_requests(KNOBBED) == [native.BuildRequest(native_source(KNOBBED), "c", ("-O2",))]


def test_native_requests_of_a_candidate_failing_the_gate_is_empty(session):
    assert session.native_requests(IMPORTS_OS) == []
