"""The guard's cascade on honest candidates: verdicts, workloads, incumbents."""

from __future__ import annotations

import pytest
import torch

from kernelkiln.errors import UserError
from kernelkiln.guard import GuardConfig, GuardSession
from kernelkiln.task import load_task
from kernelkiln.testing.candidates import CANDIDATES
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.tasks import TASKS

SOFTMAX = (CANDIDATES / "softmax_c.py").read_text()
SLOW_SOFTMAX = SOFTMAX.replace("REPEAT = 1", "REPEAT = 200")


def test_a_correct_native_candidate_is_timed_on_every_workload(softmax):
    verdict = softmax.evaluate(SOFTMAX)
    assert verdict.verdict != "REJECT", verdict.reason
    assert verdict.correct and verdict.timed
    assert [w.name for w in verdict.workloads] == ["w0", "w1"]
    for w in verdict.workloads:
        assert w.t_ref_s > 0 and w.t_cand_s > 0
        assert w.speedup == pytest.approx(w.t_ref_s / w.t_cand_s, rel=0.5)
    assert verdict.isolation.held.get("environment") is True


def test_a_much_slower_candidate_is_reverted_against_the_reference(softmax):
    verdict = softmax.evaluate(SLOW_SOFTMAX)
    assert verdict.verdict == "REVERT", verdict.reason
    assert verdict.speedup < 1


def test_a_much_faster_candidate_is_kept_against_a_slow_incumbent(softmax):
    verdict = softmax.evaluate(SOFTMAX, incumbent=SLOW_SOFTMAX)
    assert verdict.verdict == "KEEP", verdict.reason
    assert verdict.speedup_vs_incumbent > 1
    assert all(w.t_inc_s is not None for w in verdict.workloads)


def test_a_compile_error_is_a_build_reject_with_the_candidate_line():
    broken = SOFTMAX.replace("float m = -INFINITY, s = 0.0f;", "float m = -INFINITY s = 0.0f;")
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), fast_config()) as guard:
        verdict = guard.evaluate(broken)
    assert (verdict.verdict, verdict.stage) == ("REJECT", "build")
    errors = [d for d in verdict.diagnostics if d["severity"] == "error"]
    broken_line = 1 + next(i for i, line in enumerate(broken.splitlines()) if "-INFINITY s" in line)
    assert errors and errors[0]["candidate_line"] == broken_line
    assert errors[0]["line"] == 10  # the line within the C source itself


BROKEN_INLINE = '''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

DECLARATIONS = "int twice(int v);"
SOURCE = """
int twice(int v) {
    return v * 2
}
"""
ext = load_inline(name="ext", cpp_sources=[DECLARATIONS, SOURCE], no_implicit_headers=True)


class ModelNew(nn.Module):
    pass
'''


def test_a_load_inline_compile_error_names_the_candidate_line_of_its_source_string():
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), fast_config()) as guard:
        verdict = guard.evaluate(BROKEN_INLINE)
    assert (verdict.verdict, verdict.stage) == ("REJECT", "build")
    errors = [d for d in verdict.diagnostics if d["severity"] == "error"]
    assert errors and errors[0]["candidate_line"] == 1 + BROKEN_INLINE.splitlines().index("    return v * 2")


def test_models_with_positional_init_args_get_the_same_seeded_parameters():
    with GuardSession(load_task(TASKS / "tiny_linear.py"), fast_config()) as guard:
        verdict = guard.evaluate((CANDIDATES / "linear_c.py").read_text())
    assert verdict.verdict != "REJECT", verdict.reason


def test_calling_the_reference_module_at_run_time_is_rejected():
    cheat = (
        (CANDIDATES / "linear_c.py")
        .read_text()
        .replace("        x = x.contiguous()\n", "        return self.linear(x)\n", 1)
    )
    with GuardSession(load_task(TASKS / "tiny_linear.py"), fast_config()) as guard:
        verdict = guard.evaluate(cheat)
    assert (verdict.verdict, verdict.stage) == ("REJECT", "check")
    assert "reference op 'linear'" in verdict.reason


def test_an_incumbent_that_fails_the_gate_is_a_user_error(softmax):
    with pytest.raises(UserError, match="the incumbent fails the gate"):
        softmax.evaluate(SOFTMAX, incumbent="import os\nclass ModelNew:\n    pass\n")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the cuda guard starts here")
def test_a_cuda_guard_without_a_gpu_is_a_one_line_user_error_before_any_worker_starts():
    with pytest.raises(UserError, match="--platform cuda: no CUDA device is visible") as caught:
        GuardSession(load_task(TASKS / "tiny_softmax.py"), GuardConfig(platform="cuda"))
    assert "\n" not in str(caught.value)


def test_a_session_refuses_to_start_when_clock_locking_was_asked_for_and_failed():
    from kernelkiln.errors import UserError

    with pytest.raises(UserError, match="clock locking at 1500 MHz was asked for and failed"):
        GuardSession(load_task(TASKS / "tiny_softmax.py"), fast_config(lock_clocks_mhz=1500))


def test_a_candidate_no_round_of_which_could_be_timed_cleanly_is_not_measured_never_kept(monkeypatch):
    from kernelkiln.guard.measurement import timing

    real = timing.batch_time
    monkeypatch.setattr(timing, "batch_time", lambda *a: timing.Sample(real(*a).seconds, correction=1.0))
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), fast_config()) as guard:
        verdict = guard.evaluate(SOFTMAX, incumbent=SLOW_SOFTMAX)
    assert verdict.verdict == "ACCEPT" and verdict.unmeasured and verdict.correct
    assert verdict.reason.startswith("not measured: workload w0: only 0 of 4 timing rounds were clean")
    assert verdict.speedup is None and not verdict.workloads
    assert verdict.timing is not None


def _one_slow_incumbent_process(monkeypatch, factor: float) -> None:
    """The first incumbent worker of the test runs ``factor`` times slower, as a process in a slow phase of its
    own does (its rounds' times scaled, nothing to account for); later incumbent workers run at full speed."""
    from kernelkiln.guard import session

    real, slow = session.Timer.run, []

    def run(self, index, budget_s):
        series = real(self, index, budget_s)
        slow.append(slow[0] if slow else self.workers["inc"])
        if self.workers["inc"] is slow[0]:
            series.times["inc"] = [t * factor for t in series.times["inc"]]
        return series

    monkeypatch.setattr(session.Timer, "run", run)


def test_an_identical_candidate_against_an_incumbent_in_a_slow_process_is_not_kept(monkeypatch):
    # 4x: beyond the widest band two replicates can have (max_margin twice), so the figures must disagree; and
    # a phase that large must be replicated (replicate_within), which no process seen here ever needed.
    _one_slow_incumbent_process(monkeypatch, 4.0)
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), fast_config(replicate_within=8.0)) as guard:
        verdict = guard.evaluate(SOFTMAX, incumbent=SOFTMAX)
    assert verdict.verdict == "ACCEPT" and verdict.correct, verdict.reason
    assert verdict.unmeasured and "did not replicate" in verdict.reason


def test_without_replication_a_slow_incumbent_process_makes_a_false_keep(monkeypatch):
    _one_slow_incumbent_process(monkeypatch, 4.0)
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), fast_config(replicate="none")) as guard:
        verdict = guard.evaluate(SOFTMAX, incumbent=SOFTMAX)
    assert verdict.verdict == "KEEP", verdict.reason


def test_a_keep_within_replicate_within_is_timed_again_in_fresh_processes():
    # SLOW_SOFTMAX is about 75x slower: far beyond the default replicate_within. Which figure stands, or whether
    # the two agree at all on a busy machine, is scoring.replicated's (tests/guard/measurement/test_scoring.py).
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), fast_config(replicate_within=1000.0)) as guard:
        verdict = guard.evaluate(SOFTMAX, incumbent=SLOW_SOFTMAX)
    assert verdict.verdict != "REVERT" and "in fresh processes" in verdict.reason, verdict.reason


def test_an_identical_candidate_whose_own_process_is_slow_is_not_reverted(monkeypatch):
    from kernelkiln.guard import session

    real, slow = session.Timer.run, []

    def run(self, index, budget_s):
        series = real(self, index, budget_s)
        slow.append(slow[0] if slow else self.workers["cand"])
        if self.workers["cand"] is slow[0]:
            series.times["cand"] = [t * 4.0 for t in series.times["cand"]]
        return series

    monkeypatch.setattr(session.Timer, "run", run)
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), fast_config(replicate_within=8.0)) as guard:
        verdict = guard.evaluate(SOFTMAX, incumbent=SOFTMAX)
    assert verdict.verdict == "ACCEPT" and verdict.unmeasured, verdict.reason


def test_a_decision_beyond_replicate_within_stands_on_one_timing():
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), fast_config(replicate_within=1.01)) as guard:
        verdict = guard.evaluate(SOFTMAX, incumbent=SLOW_SOFTMAX)
    assert verdict.verdict == "KEEP" and "replicated" not in verdict.reason, verdict.reason


def test_a_replicate_times_replicate_rounds_without_checking_again(monkeypatch):
    from kernelkiln.guard import session

    real_run, real_check, rounds, checks = session.Timer.run, session.GuardSession._check, [], []

    def run(self, index, budget_s):
        series = real_run(self, index, budget_s)
        rounds.append(len(series.times["ref"]))
        return series

    def check(self, worker, cases):
        checks.append(len(rounds))  # how many workloads were timed before this check
        return real_check(self, worker, cases)

    monkeypatch.setattr(session.Timer, "run", run)
    monkeypatch.setattr(session.GuardSession, "_check", check)
    # The stop rule settles late (target_rse): the first timing runs past replicate_rounds; the replicate does not.
    config = fast_config(
        replicate_within=1000.0, time_budget_s=60.0, target_rse=1e-12, max_rounds=8, replicate_rounds=3
    )
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), config) as guard:
        verdict = guard.evaluate(SOFTMAX, incumbent=SLOW_SOFTMAX)
    # timed again, whether the two figures of a ~75x candidate agree ("replicated:") or not ("did not replicate")
    assert ", then " in verdict.reason and "x in fresh processes" in verdict.reason, verdict.reason
    assert len(rounds) == 4 and min(rounds[:2]) > 3 and rounds[2:] == [3, 3]  # two workloads, then the replicate
    assert checks == [0, 0]  # the candidate and the incumbent, once, before any timing


def test_a_replicate_whose_figure_does_not_decide_yet_times_on(monkeypatch):
    from kernelkiln.guard import session

    real_run, rounds = session.Timer.run, []

    def run(self, index, budget_s):
        series = real_run(self, index, budget_s)
        rounds.append(len(series.times["ref"]))
        return series

    monkeypatch.setattr(session.Timer, "run", run)
    monkeypatch.setattr(session, "replicate_settled", lambda series, config: False)
    config = fast_config(
        replicate_within=1000.0, time_budget_s=60.0, target_rse=1e-12, max_rounds=8, replicate_rounds=3
    )
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), config) as guard:
        verdict = guard.evaluate(SOFTMAX, incumbent=SLOW_SOFTMAX)
    # timed again, whether the two figures of a ~75x candidate agree ("replicated:") or not ("did not replicate")
    assert ", then " in verdict.reason and "x in fresh processes" in verdict.reason, verdict.reason
    assert len(rounds) == 4 and min(rounds[2:]) > 3, rounds


def test_clean_rounds_slower_than_the_time_budget_are_taken_up_to_the_minimum_not_called_blind():
    # Nothing dropped (max_correction=1): on a busy machine a disturbed round would end timing by another rule.
    config = fast_config(time_budget_s=0.002, batch_target_s=0.005, replicate="none", max_correction=1.0)
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), config) as guard:
        verdict = guard.evaluate(SOFTMAX)
    assert verdict.timed and not verdict.unmeasured, verdict.reason
    assert all(w.rounds >= config.min_rounds for w in verdict.workloads)
