"""Triton candidates: checked under Triton's interpreter without a GPU (never timed), timed on one."""

from __future__ import annotations

import pytest
import torch
import triton  # noqa: F401 - a test dependency: without it these tests must fail, not skip

from kernelkiln.guard import GuardConfig, GuardSession, diagnose
from kernelkiln.guard.session import INTERPRETED
from kernelkiln.task import load_task
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.tasks import TASKS

SOFTMAX = (CANDIDATES / "softmax_triton.py").read_text()
# Divides by the sum plus one. The row maximum is still subtracted, so the sum lies in [1, dim]
# and every input gives an error far outside tolerance elementwise. (Without the subtraction the
# sum of exp(4 x randn) can be so large that the +1 shows only in the output-wide bound.)
WRONG = SOFTMAX.replace("e / tl.sum(e, axis=0)", "e / (tl.sum(e, axis=0) + 1.0)")


def test_a_correct_triton_kernel_is_accepted_untimed_under_the_interpreter(softmax):
    verdict = softmax.evaluate(SOFTMAX)
    assert (verdict.verdict, verdict.stage) == ("ACCEPT", "check"), verdict.reason
    assert verdict.correct and not verdict.timed
    assert verdict.speedup is None and verdict.speedup_vs_incumbent is None and verdict.workloads == []
    assert verdict.reason == INTERPRETED
    assert verdict.isolation.held.get("environment") is True


def test_a_wrong_triton_kernel_is_rejected_at_check_with_the_mismatch(softmax):
    verdict = softmax.evaluate(WRONG)
    assert (verdict.verdict, verdict.stage) == ("REJECT", "check"), verdict.reason
    assert "outside tolerance" in verdict.reason and "expected" in verdict.reason


def test_a_triton_candidate_reaching_triton_runtime_is_rejected_at_the_gate(softmax):
    verdict = softmax.evaluate("import triton.runtime\n" + SOFTMAX)
    assert (verdict.verdict, verdict.stage) == ("REJECT", "gate")
    assert "triton.runtime" in verdict.reason


def test_an_interpreted_incumbent_leaves_the_candidate_judged_against_the_reference(softmax):
    verdict = softmax.evaluate((CANDIDATES / "softmax_c.py").read_text(), incumbent=SOFTMAX)
    assert verdict.verdict != "REJECT" and verdict.timed, verdict.reason
    assert verdict.speedup is not None and verdict.speedup_vs_incumbent is None
    assert "judged against the reference" in verdict.reason


def test_the_profile_diagnostic_says_an_interpreted_candidate_is_not_timed(softmax):
    assert diagnose.profile_report(softmax, SOFTMAX, 0.5) == f"NOT TIMED: {INTERPRETED}"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (scripts/gpu_check.sh runs it on one)")
def test_a_triton_kernel_is_timed_on_a_gpu():
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), GuardConfig(platform="cuda", time_budget_s=2.0)) as guard:
        verdict = guard.evaluate(SOFTMAX)
    assert verdict.correct and verdict.timed and verdict.speedup > 0, verdict.reason
