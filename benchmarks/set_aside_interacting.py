"""The set-aside rule on a space whose knobs interact in pairs: does holding losing values back slow the search?

    python benchmarks/set_aside_interacting.py [--objectives 6] [--seeds 3] [--budget 50]

The tuner tests' synthetic space (4 knobs x 6 values; a factor per value and one per value pair of (A, B) and
of (C, D), drawn from each objective's seed), searched by TPE until a setting reaches 95% of the space's best,
with the rule as it is (a value that lost every time is set aside when it also trails a rival value: one
whose median figure is knobs.TRAILS times its best) and without the trailing clause (TRAILS infinite: only
losses below the median of every figure count). Prints each arm's mean evaluations (budget + 1 when never)
and the paired difference over the same objective and seed.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics

from kernelkiln.agents.tuner import Tuner
from kernelkiln.store.records import Attempt
from kernelkiln.task import knobs as K
from kernelkiln.testing.knob_spaces import NAMES, SPACE, interacting
from kernelkiln.testing.turns import make_turn


def evaluations(objective: int, seed: int, budget: int) -> int:
    speedup = interacting(objective)
    target = 0.95 * max(speedup(dict(zip(NAMES, v, strict=True))) for v in itertools.product(range(6), repeat=4))
    tuner, turn, best = Tuner("a0", rng_seed=seed), make_turn(code=SPACE), 0.0
    for n in range(1, budget + 1):
        proposal = tuner.propose(turn)
        if proposal is None:
            return budget + 1
        value = speedup(proposal.case.knobs)
        keep = value > best
        if keep:
            best, turn = value, turn.__class__(**{**turn.__dict__, "code": proposal.code})
        verdict = "KEEP" if keep else "REVERT"
        tuner.observe(
            Attempt(task_id="t", agent="a0", verdict=verdict, speedup=value, case={"knobs": proposal.case.knobs})
        )
        if best >= target:
            return n
    return budget + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objectives", type=int, default=6)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=50)
    args = parser.parse_args()
    runs = [(o, s) for o in range(args.objectives) for s in range(args.seeds)]
    trails = K.TRAILS
    arms = {}
    for name, value in (("without the trailing clause", math.inf), (f"TRAILS = {trails}", trails)):
        K.TRAILS = value
        arms[name] = [evaluations(o, s, args.budget) for o, s in runs]
    K.TRAILS = trails
    for name, counts in arms.items():
        never = sum(c > args.budget for c in counts)
        print(f"{name:28} mean {statistics.fmean(counts):5.1f} evaluations to 95% (never: {never} of {len(counts)})")
    a, b = arms.values()
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    half = 1.96 * statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else float("nan")
    print(
        f"paired difference (rule - without): {statistics.fmean(diffs):+.1f} [{statistics.fmean(diffs) - half:+.1f}, "
        f"{statistics.fmean(diffs) + half:+.1f}] evaluations"
    )


if __name__ == "__main__":
    main()
