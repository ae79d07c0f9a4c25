"""The end-to-end check and the side-by-side timing."""

from __future__ import annotations

import time

import pytest
import torch

from kernelkiln.model import verify
from kernelkiln.model.verify import check, time_arms
from kernelkiln.testing.models import Shifted, activations, tiny_mlp


@pytest.fixture(scope="module")
def model():
    return tiny_mlp()


def test_a_spliced_model_that_is_off_by_one_fails_the_check(model):
    result = check(model, Shifted(model, 1.0), activations)
    assert result.failure and "off by" in result.failure
    assert result.trials == 1 and result.max_abs_error == pytest.approx(1.0, abs=1e-5)


def test_identical_callables_pass_the_check(model):
    result = check(model, model, activations, trials=3)
    assert result.failure == "" and result.trials == 3 and result.max_abs_error == 0.0


def test_a_difference_within_tolerance_passes_and_is_reported(model):
    result = check(model, Shifted(model, 1e-6), activations, trials=2)
    assert result.failure == "" and 0.0 < result.max_abs_error < 1e-5


def test_each_trial_draws_fresh_inputs(model):
    first = []

    def stale(*inputs):  # right on the first draw only: the answer it remembers
        if not first:
            first.append(model(*inputs))
        return first[0]

    result = check(model, stale, activations, trials=3)
    assert result.failure.startswith("trial 1:")


def test_outputs_of_another_shape_fail_the_check(model):
    result = check(model, lambda x: model(x)[:-1], activations)
    assert "is not a torch.float32 tensor of (8, 32)" in result.failure


def test_a_nan_where_eager_is_finite_fails_the_check(model):
    def poisoned(x):
        out = model(x).clone()
        out[0, 0] = float("nan")
        return out

    assert "not finite" in check(model, poisoned, activations).failure


def test_timing_gives_every_arm_positive_seconds_and_consistent_ratios(model):
    x = activations()
    arms = {"eager": lambda: model(*x), "again": lambda: model(*x), "sum": lambda: x[0].sum()}
    timing = time_arms(arms, rounds=5, batch_s=0.002)
    assert set(timing.seconds) == set(arms) and all(s > 0 for s in timing.seconds.values())
    assert timing.rounds == 5 == len(timing.per_round)
    assert timing.speedup["eager"] == 1.0 and timing.ratio("again", "again") == 1.0
    for arm in arms:  # an odd number of rounds: the median of the reciprocals is the reciprocal of the median
        assert timing.ratio("eager", arm) == pytest.approx(timing.speedup[arm])
        assert timing.ratio(arm, "eager") == pytest.approx(1 / timing.speedup[arm])
        low, high = timing.interval[arm]
        assert 0 < low <= timing.speedup[arm] <= high


def test_a_kernel_right_only_on_the_inputs_own_domain_fails_a_wider_trial():
    import torch

    def nonnegative():
        return (torch.rand(16, 8),)

    # ReLU as the identity is right on [0, 1) inputs, wrong once widened inputs turn negative.
    result = check(torch.relu, lambda x: x, nonnegative, trials=3, wide=2)
    assert result.failure.startswith("wider trial 3: output 0 is off by") and result.wide == 1
    assert check(torch.relu, lambda x: x, nonnegative, trials=3).failure == ""


def test_wider_trials_count_only_where_eager_stays_finite_and_need_a_floating_input():
    import torch

    result = check(torch.exp, torch.exp, lambda: (torch.rand(4) * 80,), trials=1, wide=3)
    assert result.failure == "" and result.wide + result.wide_skipped == 3 and result.wide_skipped >= 1
    ints = check(lambda x: x + 1, lambda x: x + 1, lambda: (torch.randint(0, 9, (4,)),), trials=2, wide=2)
    assert ints.failure == "" and ints.trials == 2 and ints.wide == 0


def _waits(step_ns: int):
    """A fake run-queue clock that advances ``step_ns`` at every reading."""
    state = {"ns": 0}

    def own_wait_ns() -> int:
        state["ns"] += step_ns
        return state["ns"]

    return own_wait_ns


def test_rounds_a_run_queue_wait_disturbed_are_dropped_and_past_the_limit_give_no_figure(monkeypatch):
    # A sleeping arm uses no CPU, so its time rests on the wall clock less the wait: a wait of 50 ms in a
    # batch of a few ms takes out nearly all of it, beyond what an estimate may carry.
    monkeypatch.setattr(verify.accounting, "own_wait_ns", _waits(50_000_000))
    arms = {"a": lambda: time.sleep(0.005), "b": lambda: time.sleep(0.005)}
    timing = time_arms(arms, rounds=6, batch_s=0.002)
    assert timing.disturbed == 6  # every round disturbed: dropped up to ``rounds`` times, never kept
    assert timing.per_round == () and timing.speedup == {} and timing.seconds == {}
    assert timing.blind.startswith("only 0 of 6 timing rounds were clean")


def test_a_single_threaded_arm_is_timed_by_its_cpu_time_whatever_the_wait(monkeypatch):
    monkeypatch.setattr(verify.accounting, "own_wait_ns", _waits(50_000_000))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    x = torch.randn(64, 64)
    try:
        timing = time_arms({"mm": lambda: x @ x}, rounds=3, batch_s=0.002)
    finally:
        torch.set_num_threads(threads)
    assert timing.disturbed == 0  # the thread's CPU time is a measurement: nothing rests on the wait
    assert timing.seconds["mm"] > 0


def test_undisturbed_rounds_are_kept(monkeypatch):
    monkeypatch.setattr(verify.accounting, "own_wait_ns", _waits(0))
    timing = time_arms({"a": lambda: time.sleep(0.001)}, rounds=5, batch_s=0.002)
    assert timing.disturbed == 0 and len(timing.per_round) == 5 and timing.blind == ""
