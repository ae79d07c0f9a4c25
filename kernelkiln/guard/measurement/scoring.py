"""From timed rounds to figures and a decision: speedups, the noise band, KEEP/ACCEPT/REVERT."""

from __future__ import annotations

import math
import statistics
from typing import Any, cast

from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.measurement.timing import Series, rse
from kernelkiln.guard.verdict import Verdict, WorkloadResult
from kernelkiln.platforms import Peaks
from kernelkiln.platforms.sol import sol_bound_s, sol_fraction
from kernelkiln.stats import geomean
from kernelkiln.task import Workload


def workload_result(workload: Workload, series: Series, peaks: Peaks) -> WorkloadResult:
    """One workload's figures: medians of the kept rounds, speedups as medians of paired ratios."""
    med = {role: statistics.median(ts) for role, ts in series.times.items()}
    logs = series.log_ratios("ref", "cand")
    inc = math.exp(statistics.median(series.log_ratios("inc", "cand"))) if "inc" in med else None
    bound = sol_bound_s(workload.flops, workload.bytes, peaks)
    return WorkloadResult(
        name=workload.name,
        sizes=workload.sizes,
        t_ref_s=med["ref"],
        t_cand_s=med["cand"],
        t_inc_s=med.get("inc"),
        speedup=math.exp(statistics.median(logs)),
        speedup_vs_incumbent=inc,
        spread=rse(logs),
        rounds=len(logs),
        reps=series.reps["cand"],
        dropped=series.dropped,
        correction=statistics.median(series.corrections),
        waited=statistics.median(series.waits) if series.waits else 0.0,
        sol_fraction=sol_fraction(bound, med["cand"]),
        ref_sol_fraction=sol_fraction(bound, med["ref"]),
    )


def noise_margin(series: list[Series], config: GuardConfig) -> float:
    """The noise band in log-speedup, at most max_margin: max(floor, margin_sigmas x standard error), widened by
    the share of the rounds' time taken out by estimate (a figure that rests on x% estimated is not known better
    than x%). The floor is min_margin, raised by wait_margin x the share of the time the workers were kept from
    running. Medians over each workload's kept rounds, the largest over workloads."""
    ses = [rse(s.log_ratios("inc" if "inc" in s.times else "ref", "cand")) for s in series]
    se = math.sqrt(sum(s * s for s in ses)) / len(ses)
    estimated = max((statistics.median(s.corrections) for s in series if s.corrections), default=0.0)
    waited = max((statistics.median(s.waits) for s in series if s.waits), default=0.0)
    floor = config.min_margin + config.wait_margin * waited
    return min(config.max_margin, max(floor, config.margin_sigmas * se) + estimated)


def decisive(series: Series, config: GuardConfig) -> bool:
    """Whether one workload's rounds decide on their own: the figure against the rival (the incumbent, else the
    reference) beyond its noise band, either way."""
    rival = "inc" if "inc" in series.times else "ref"
    return abs(statistics.median(series.log_ratios(rival, "cand"))) > noise_margin([series], config)


def replicate_settled(series: Series, config: GuardConfig) -> bool:
    """A replicate's early look: at ``replicate_rounds`` clean rounds, its figure already confirms or contradicts
    the first (``decisive``); otherwise it times on under the usual rule."""
    return len(series.times["ref"]) == config.replicate_rounds and decisive(series, config)


def beyond_light(results: list[WorkloadResult], factor: float, peaks: Peaks) -> str | None:
    """Why a candidate's times are physically impossible on this device, or None."""
    for r in results:
        if factor and r.sol_fraction is not None and r.sol_fraction > factor and (r.ref_sol_fraction or 0.0) <= factor:
            return (
                f"workload {r.name}: measured {r.sol_fraction:.1f}x faster than the speed-of-light bound "
                f"({peaks.source}): skipped work or a cached result, not a record"
            )
    return None


def judgement(log_speedup: float, margin: float, against: str) -> tuple[str, str]:
    """KEEP, ACCEPT or REVERT for a log-speedup against ``against`` (the incumbent or the reference) and its noise
    band, with the reason in words."""
    figure = math.exp(log_speedup)
    if log_speedup > margin:
        return "KEEP", f"faster than {against} by {figure:.3f}x (noise band ±{margin:.1%})"
    if log_speedup < -margin:
        return "REVERT", f"slower than {against}: {figure:.3f}x (noise band ±{margin:.1%})"
    return "ACCEPT", f"within the noise band of {against}: {figure:.3f}x (±{margin:.1%})"


def decide(
    results: list[WorkloadResult],
    margin: float,
    has_incumbent: bool,
    sol_hack_factor: float,
    peaks: Peaks,
    **fields: Any,
) -> Verdict:
    """The verdict on a correct, timed candidate; ``fields`` go into it as they are."""
    impossible = beyond_light(results, sol_hack_factor, peaks)
    if impossible:
        return Verdict.reject("time", impossible, workloads=results, **fields)
    speedup = geomean([r.speedup for r in results])
    vs_inc = geomean([cast(float, r.speedup_vs_incumbent) for r in results]) if has_incumbent else None
    log_speedup = math.log(vs_inc if vs_inc is not None else cast(float, speedup))  # results are not empty
    decision, reason = judgement(log_speedup, margin, "the incumbent" if has_incumbent else "the reference")
    return Verdict(
        verdict=decision,
        stage="verdict",
        reason=reason,
        correct=True,
        speedup=speedup,
        speedup_vs_incumbent=vs_inc,
        noise_margin=margin,
        timed=True,
        workloads=results,
        **fields,
    )


def gain(verdict: Verdict) -> float:
    """A timed verdict's log-speedup against what it was judged against (the incumbent, else the reference)."""
    figure = verdict.speedup_vs_incumbent if verdict.speedup_vs_incumbent is not None else verdict.speedup
    return math.log(cast(float, figure))


def worth_replicating(verdict: Verdict, config: GuardConfig) -> bool:
    """Whether ``config.replicate`` times ``verdict`` again: a decision it covers, within ``replicate_within``."""
    covered = {"decisions": ("KEEP", "REVERT"), "keeps": ("KEEP",)}.get(config.replicate, ())
    return verdict.verdict in covered and abs(gain(verdict)) < math.log(config.replicate_within)


def replicated(first: Verdict, second: Verdict) -> Verdict:
    """A KEEP or REVERT (``first``) judged against its replicate in fresh processes (``second``).

    Two figures more than their two noise bands apart mean some process ran at a speed of its own: not measured,
    whichever way each points (two REVERTs at 0.87x and 0.50x of a candidate that ties were both false). Otherwise
    the figure nearer no difference stands, against the narrower of the two bands widened by the distance between
    the figures: how far apart two processes read the same code is noise no band from one process's rounds can see
    (identical code read 1.102x, then 1.040x against ±3.0%: not a KEEP), and the narrower band is the
    better-resolved process's (a replicate stops at its early look with a band of up to ±25%; 1.306x ±6.9%, then
    1.265x ±23.2% is a KEEP). So a KEEP or a REVERT needs both figures beyond that band. Where both figures decide
    the same way on their own bands but the widened band holds the nearer one, the processes agree on the direction
    and not on the size: not measured either, never a tie (an honest 1.3x read 1.307x, then 1.742x is no ACCEPT).
    """
    if second.verdict == "REJECT" or not second.timed:
        return second
    seconds = first.seconds + second.seconds
    bands = f"bands ±{first.noise_margin:.1%}, ±{second.noise_margin:.1%}"
    figures = f"{math.exp(gain(first)):.3f}x, then {math.exp(gain(second)):.3f}x in fresh processes ({bands})"
    distance = abs(gain(first) - gain(second))
    if distance > cast(float, first.noise_margin) + cast(float, second.noise_margin):
        return Verdict.not_measured(
            f"the figure did not replicate: {figures}; a worker ran at a speed of its own",
            timing=second.timing,
            seconds=seconds,
        )
    kept = second if abs(gain(second)) <= abs(gain(first)) else first
    margin = min(cast(float, first.noise_margin), cast(float, second.noise_margin)) + distance
    against = "the incumbent" if kept.speedup_vs_incumbent is not None else "the reference"
    decision, reason = judgement(gain(kept), margin, against)
    if decision == "ACCEPT" and first.verdict == second.verdict != "ACCEPT":
        return Verdict.not_measured(
            f"both figures say {first.verdict}, {distance:.1%} apart: {figures}, more than the narrower band "
            "holds; a worker ran at a speed of its own",
            timing=second.timing,
            seconds=seconds,
        )
    return kept.model_copy(
        update={
            "verdict": decision,
            "reason": f"{reason}; replicated: {figures}, the band widened by their distance",
            "seconds": seconds,
            "noise_margin": margin,
        }
    )
