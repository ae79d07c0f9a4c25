"""From timed rounds to a decision: the noise band, its cap, and the speed-of-light flag."""

from __future__ import annotations

import math

import pytest

from kernelkiln.guard import GuardConfig
from kernelkiln.guard.measurement.contention import contended
from kernelkiln.guard.measurement.scoring import (
    beyond_light,
    decide,
    decisive,
    noise_margin,
    replicate_settled,
    replicated,
    worth_replicating,
)
from kernelkiln.guard.measurement.timing import Series
from kernelkiln.guard.verdict import Verdict, WorkloadResult
from kernelkiln.platforms import Peaks

PEAKS = Peaks(bandwidth_gbs=10.0, gflops_fp32=100.0, source="test peaks")


def _timed(speedup: float = 10.0, sol: float | None = None, ref_sol: float | None = None, vs_inc=None):
    return WorkloadResult(
        name="w0",
        sizes={},
        t_ref_s=1e-3,
        t_cand_s=1e-3 / speedup,
        speedup=speedup,
        spread=0.01,
        rounds=6,
        reps=10,
        sol_fraction=sol,
        ref_sol_fraction=ref_sol,
        speedup_vs_incumbent=vs_inc,
    )


def _series(ratios: list[float]) -> Series:
    return Series({"ref": [1.0] * len(ratios), "cand": [1.0 / r for r in ratios]}, reps={"ref": 1, "cand": 1})


def test_a_time_beyond_the_speed_of_light_is_a_hack_flag_unless_the_reference_breaks_it_too():
    assert "faster than the speed-of-light bound" in beyond_light([_timed(sol=10.0, ref_sol=0.5)], 4.0, PEAKS)
    assert beyond_light([_timed(sol=10.0, ref_sol=9.0)], 4.0, PEAKS) is None  # the metadata or the peaks are off
    assert beyond_light([_timed(sol=3.0, ref_sol=0.5)], 4.0, PEAKS) is None  # within the generous factor
    assert beyond_light([_timed()], 4.0, PEAKS) is None  # no metadata: no bound
    assert beyond_light([_timed(sol=10.0, ref_sol=0.5)], 0.0, PEAKS) is None  # disabled


def test_the_noise_band_follows_the_spread_between_its_floor_and_its_cap():
    config = GuardConfig()
    assert noise_margin([_series([1.0] * 12)], config) == config.min_margin
    wild = noise_margin([_series([0.2, 5.0] * 6)], config)
    assert wild == config.max_margin
    middling = noise_margin([_series([0.9, 1.1] * 6)], config)
    assert config.min_margin < middling < config.max_margin


def test_the_noise_band_widens_by_the_share_of_time_taken_out_by_estimate():
    config = GuardConfig()
    steady = _series([1.0] * 12)
    estimated = _series([1.0] * 12)
    estimated.corrections = [0.1] * 12
    assert noise_margin([steady], config) == config.min_margin
    assert noise_margin([steady, estimated], config) == pytest.approx(config.min_margin + 0.1)
    estimated.corrections = [0.9] * 12
    assert noise_margin([estimated], config) == config.max_margin


def test_the_noise_bands_floor_rises_with_the_share_of_time_the_workers_were_kept_from_running():
    config = GuardConfig()
    quiet, busy = _series([1.0] * 12), _series([1.0] * 12)
    quiet.waits, busy.waits = [0.0] * 12, [1.0] * 12
    assert noise_margin([quiet], config) == config.min_margin
    assert noise_margin([quiet, busy], config) == pytest.approx(config.min_margin + config.wait_margin)


def test_a_3x_candidate_is_kept_and_a_3x_slower_one_reverted_however_noisy_the_machine():
    widest = GuardConfig().max_margin
    assert decide([_timed(3.0)], widest, False, 4.0, PEAKS).verdict == "KEEP"
    assert decide([_timed(1 / 3)], widest, False, 4.0, PEAKS).verdict == "REVERT"
    assert decide([_timed(1.0, vs_inc=3.0)], widest, True, 4.0, PEAKS).verdict == "KEEP"


def test_a_speedup_inside_the_band_is_accepted_and_the_figures_are_kept():
    verdict = decide([_timed(1.02)], math.log(1.03), False, 4.0, PEAKS, seconds=1.5)
    assert verdict.verdict == "ACCEPT" and verdict.correct and verdict.timed
    assert verdict.speedup == pytest.approx(1.02) and verdict.seconds == 1.5


def _probe(at_n: list[float], at_one: list[float], blind: str = "") -> Series:
    return Series(times={"ref": at_n, "cand": at_one}, reps={"ref": 1, "cand": 1}, blind=blind)


def test_a_reference_markedly_slower_at_n_threads_than_at_one_is_contended():
    why = contended(_probe([2e-3, 2.1e-3, 1.9e-3, 2e-3, 2e-3, 2.05e-3], [1e-3] * 6), 2, GuardConfig())
    assert "2.00x slower at 2 threads than at one" in why and "timed at 1 thread" in why


def test_a_reference_as_fast_or_faster_at_n_threads_is_not_contended():
    config = GuardConfig()
    assert contended(_probe([0.5e-3] * 6, [1e-3] * 6), 4, config) == ""
    assert contended(_probe([1.05e-3, 1.04e-3, 1.06e-3, 1.05e-3, 1.05e-3, 1.05e-3], [1e-3] * 6), 4, config) == ""


def test_a_slowdown_inside_the_probes_own_noise_is_not_contention():
    noisy_n = [1.0e-3, 1.6e-3, 0.8e-3, 1.5e-3, 0.9e-3, 1.25e-3]
    assert contended(_probe(noisy_n, [1e-3] * 6), 2, GuardConfig()) == ""


def test_a_probe_that_could_not_be_timed_cleanly_counts_as_contended():
    why = contended(_probe([], [], blind="only 0 of 40 timing rounds were clean"), 2, GuardConfig())
    assert "could not be timed cleanly" in why and "only 0 of 40" in why


def _judged(speedup: float, margin: float = 0.03) -> Verdict:
    return decide([_timed(speedup)], margin, False, 0.0, PEAKS, seconds=1.0)


def test_a_keep_whose_replicate_lies_beyond_both_bands_is_not_measured():
    verdict = replicated(_judged(1.6), _judged(1.0))
    assert verdict.verdict == "ACCEPT" and verdict.unmeasured and verdict.correct
    assert "did not replicate: 1.600x, then 1.000x" in verdict.reason
    assert verdict.seconds == 2.0


def test_a_keep_whose_replicate_agrees_stands_at_the_less_favourable_of_the_two():
    for first, second in ((1.30, 1.28), (1.28, 1.30)):
        verdict = replicated(_judged(first), _judged(second))
        assert verdict.verdict == "KEEP" and verdict.speedup == pytest.approx(1.28)
        assert "replicated: " in verdict.reason


def test_two_figures_that_agree_widen_the_band_by_their_distance():
    verdict = replicated(_judged(1.30), _judged(1.25))
    assert verdict.verdict == "KEEP" and verdict.speedup == pytest.approx(1.25)
    assert verdict.noise_margin == pytest.approx(0.03 + math.log(1.30 / 1.25))
    assert "widened by their distance" in verdict.reason and "bands ±3.0%, ±3.0%" in verdict.reason
    revert = replicated(_judged(0.70), _judged(0.72))
    assert revert.verdict == "REVERT" and revert.noise_margin == pytest.approx(0.03 + math.log(0.72 / 0.70))


def test_two_figures_that_agree_are_judged_against_the_narrower_band():
    # the replicate's early look left it a ±23.2% band; the first's ±6.9% resolves the same code better
    verdict = replicated(_judged(1.306, 0.069), _judged(1.265, 0.232))
    assert verdict.verdict == "KEEP" and verdict.speedup == pytest.approx(1.265)
    assert verdict.noise_margin == pytest.approx(0.069 + math.log(1.306 / 1.265))


def test_two_figures_that_agree_on_the_direction_but_not_the_size_are_not_measured():
    # identical code read 1.102x, then 1.040x (±3%): a KEEP under the nearer one's band alone, a tie under none
    for first, second, band in ((1.102, 1.040, 0.03), (1.307, 1.742, 0.15), (0.75, 0.85, 0.10)):
        verdict = replicated(_judged(first, band), _judged(second, band))
        assert verdict.verdict == "ACCEPT" and verdict.unmeasured, (first, second)
        assert "apart" in verdict.reason and "x in fresh processes" in verdict.reason


def test_a_keep_whose_replicate_agrees_but_falls_inside_the_band_is_accepted():
    verdict = replicated(_judged(1.04), _judged(1.02))
    assert verdict.verdict == "ACCEPT" and verdict.timed and verdict.speedup == pytest.approx(1.02)


def test_a_replicate_that_fails_or_could_not_be_timed_decides():
    rejected = Verdict.reject("check", "wrong in a fresh process")
    assert replicated(_judged(1.5), rejected) is rejected
    blind = Verdict.not_measured("too few clean rounds")
    assert replicated(_judged(1.5), blind) is blind


def test_a_revert_whose_replicate_agrees_inside_the_band_is_accepted_and_one_that_agrees_stands():
    assert replicated(_judged(0.94), _judged(0.99)).verdict == "ACCEPT"
    verdict = replicated(_judged(0.70), _judged(0.72))
    assert verdict.verdict == "REVERT" and verdict.speedup == pytest.approx(0.72)


def test_a_decision_both_replicates_make_with_figures_beyond_both_bands_is_not_measured():
    for first, second in ((0.865, 0.501), (2.6, 1.3), (3.961, 1.115)):
        verdict = replicated(_judged(first), _judged(second))
        assert verdict.verdict == "ACCEPT" and verdict.unmeasured, (first, second)
        assert "did not replicate" in verdict.reason


def test_only_decisions_near_no_difference_are_replicated():
    decisions = GuardConfig(replicate="decisions", replicate_within=2.0)
    assert worth_replicating(_judged(1.6), decisions) and worth_replicating(_judged(0.7), decisions)
    assert not worth_replicating(_judged(2.5), decisions) and not worth_replicating(_judged(0.3), decisions)
    assert not worth_replicating(_judged(1.01), decisions)  # an ACCEPT is never replicated
    keeps = GuardConfig(replicate="keeps")
    assert worth_replicating(_judged(1.6), keeps) and not worth_replicating(_judged(0.7), keeps)
    assert not worth_replicating(_judged(1.6), GuardConfig(replicate="none"))


def _decisive(cand: list[float], rival: list[float], role: str = "inc") -> bool:
    times = {"ref": rival, "cand": cand} | ({"inc": rival} if role == "inc" else {})
    return decisive(Series(times), GuardConfig())


def test_a_figure_beyond_its_own_band_is_decisive_either_way():
    steady = [1.0, 1.001, 0.999, 1.0, 1.002, 0.998]
    assert _decisive([t / 1.3 for t in steady], steady)  # 1.3x faster than the incumbent
    assert _decisive([t * 1.3 for t in steady], steady)  # 1.3x slower
    assert _decisive([t / 1.3 for t in steady], steady, role="ref")  # no incumbent: against the reference


def test_a_figure_within_its_band_or_too_noisy_is_not_decisive():
    steady = [1.0, 1.001, 0.999, 1.0, 1.002, 0.998]
    assert not _decisive([t / 1.02 for t in steady], steady)  # inside the 3% floor
    noisy = [1.0, 0.8, 1.25, 0.9, 1.2, 0.85]
    assert not _decisive([t / 1.06 for t in steady], noisy)  # 6%, but the rounds scatter by 20%


def test_a_replicate_settles_at_replicate_rounds_only_and_only_where_its_figure_decides():
    steady = [1.0, 1.001, 0.999, 1.0, 1.002, 0.998]
    config = GuardConfig(replicate_rounds=6)

    def series(cand, rival):
        return Series({"ref": rival, "inc": rival, "cand": cand})

    assert replicate_settled(series([t / 1.3 for t in steady], steady), config)
    assert not replicate_settled(series([t / 1.3 for t in steady[:5]], steady[:5]), config)  # before its look
    assert not replicate_settled(series([t / 1.02 for t in steady], steady), config)  # inside the band
