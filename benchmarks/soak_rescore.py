"""A soak's replicated verdicts judged again under today's ``scoring.replicated``, from the figures it stored.

    python benchmarks/soak_rescore.py --tag TAG [--out benchmarks/figures/guard_soak.jsonl] [--json]

A replicated verdict depends on the timing only through its two figures and their bands, and a soak row keeps
both figures (its reason: "replicated: A x, then B x in fresh processes") and the band of the one that stood.
So a change to how two replicates combine is measured on a soak already run, without timing anything again:
each replicated row is rebuilt as two verdicts at those figures, the one that stood with its band, the other
with their distance as its band (its own is not stored; the row already passed the test that the two lie within
both bands), and combined by ``scoring.replicated``. Rows that were not replicated, or were "not measured", keep
their verdict. Printed per condition and pair: the verdicts as stored and as rescored (KEEP/ACCEPT/REVERT/not
measured), and the false KEEPs and REVERTs of each.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelkiln.guard.measurement.scoring import judgement, replicated
from kernelkiln.guard.verdict import Verdict

ROOT = Path(__file__).resolve().parents[1]
RIGHT = {"identical": "ACCEPT", "faster": "KEEP", "slower": "REVERT"}
FIGURES = re.compile(r"replicated: ([0-9.]+)x, then ([0-9.]+)x in fresh processes")


def _judged(figure: float, margin: float) -> Verdict:
    decision, reason = judgement(math.log(figure), margin, "the incumbent")
    return Verdict(
        verdict=decision, stage="verdict", reason=reason, correct=True, speedup_vs_incumbent=figure,
        speedup=figure, noise_margin=margin, timed=True,
    )  # fmt: skip


def kind(verdict: str, unmeasured: bool) -> str:
    return "not measured" if unmeasured else verdict


def rescore(row: dict) -> str:
    """The row's verdict kind under today's rule."""
    found = FIGURES.search(row["reason"])
    already = "with their distance" in row["reason"] or "widened by" in row["reason"]  # today's rule (904cbf3 on)
    if row.get("unmeasured") or not found or already or row.get("noise_margin") is None:
        return kind(row["verdict"], bool(row.get("unmeasured")))
    a, b = (math.log(float(v)) for v in found.groups())
    # The figure nearer no difference stood, with the stored band; the other's band is not stored, and the
    # stored row already passed the rule's test that the two lie within both bands: its band is their distance.
    bands = (float(row["noise_margin"]), abs(a - b)) if abs(a) <= abs(b) else (abs(a - b), float(row["noise_margin"]))
    verdict = replicated(_judged(math.exp(a), bands[0]), _judged(math.exp(b), bands[1]))
    return kind(verdict.verdict, verdict.unmeasured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tag", required=True, help="the soak's tag (its commit)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "figures" / "guard_soak.jsonl")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    rows = [r for r in map(json.loads, args.out.read_text().splitlines()) if r.get("tag") == args.tag]
    if not rows:
        raise SystemExit(f"no rows tagged {args.tag!r} in {args.out}")
    table: dict[str, dict[str, Counter]] = {}
    for row in rows:
        cell = table.setdefault(f"{row['condition']} {row['pair']}", {"stored": Counter(), "rescored": Counter()})
        cell["stored"][kind(row["verdict"], bool(row.get("unmeasured")))] += 1
        cell["rescored"][rescore(row)] += 1
    report = {}
    for name, cell in table.items():
        right = RIGHT[name.split()[1]]
        report[name] = {
            arm: {**dict(counts), "false": sum(n for k, n in counts.items() if k in ("KEEP", "REVERT") and k != right)}
            for arm, counts in cell.items()
        }
    if args.json:
        print(json.dumps(report))
        return
    for name, arms in report.items():
        line = "  ".join(
            f"{arm}: "
            + "/".join(str(arms[arm].get(k, 0)) for k in ("KEEP", "ACCEPT", "REVERT", "not measured"))
            + f" false {arms[arm]['false']}"
            for arm in ("stored", "rescored")
        )
        print(f"{name:24} {line}")
    print("(K/A/R/not measured)")


if __name__ == "__main__":
    main()
