"""A soak's replicated verdicts judged again under today's ``scoring.replicated``, from the figures it stored.

    python benchmarks/soak_rescore.py --tag TAG [--out benchmarks/figures/guard_soak.jsonl] [--json]

A replicated verdict depends on the timing only through its two figures and their bands, and a soak row keeps
both figures (its reason: "replicated: A x, then B x in fresh processes") and the band of the one that stood.
So a change to how two replicates combine is measured on a soak already run, without timing anything again:
each replicated row is rebuilt as two verdicts at those figures and combined by ``scoring.replicated``. The one
that stood gets its own band (rows from 756683f to 738a67a stored it widened by the two figures' distance, which
is taken off again); the other's band is not stored, and the row already passed the test that the two lie
within both bands: it gets the larger of the stood one's band and their distance. Rows from 7537997 on name
both bands (rounded to 0.1%), and are rescored from them, "did not replicate" rows included.
Rows that were not replicated, or were "not measured", keep their verdict.
Printed per condition and pair: the verdicts as stored and as rescored (KEEP/ACCEPT/REVERT/not measured), the
false KEEPs and REVERTs of each, and the CV of the figures each gives.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelkiln.guard.measurement.scoring import judgement, replicated
from kernelkiln.guard.verdict import Verdict

ROOT = Path(__file__).resolve().parents[1]
RIGHT = {"identical": "ACCEPT", "faster": "KEEP", "slower": "REVERT"}
FIGURES = re.compile(r"([0-9.]+)x, then ([0-9.]+)x in fresh processes")
BANDS = re.compile(r"in fresh processes \(bands ±([0-9.]+)%, ±([0-9.]+)%\)")


def _judged(figure: float, margin: float) -> Verdict:
    decision, reason = judgement(math.log(figure), margin, "the incumbent")
    return Verdict(
        verdict=decision, stage="verdict", reason=reason, correct=True, speedup_vs_incumbent=figure,
        speedup=figure, noise_margin=margin, timed=True,
    )  # fmt: skip


def kind(verdict: str, unmeasured: bool) -> str:
    return "not measured" if unmeasured else verdict


def rescore(row: dict) -> tuple[str, float | None]:
    """The row's verdict kind under today's rule, and its figure (None where not measured)."""
    found = FIGURES.search(row["reason"])
    stored = BANDS.search(row["reason"])  # from 7537997 on, a replicated row names both bands: rescored exactly
    if stored and found:
        a, b = (math.log(float(v)) for v in found.groups())
        m1, m2 = (float(v) / 100 for v in stored.groups())
        verdict = replicated(_judged(math.exp(a), m1), _judged(math.exp(b), m2))
        return kind(verdict.verdict, verdict.unmeasured), None if verdict.unmeasured else verdict.speedup_vs_incumbent
    if row.get("unmeasured") or not found or row.get("noise_margin") is None:
        unmeasured = bool(row.get("unmeasured"))
        return kind(row["verdict"], unmeasured), None if unmeasured else row.get("speedup_vs_incumbent")
    a, b = (math.log(float(v)) for v in found.groups())
    distance = abs(a - b)
    widened = "with their distance" in row["reason"] or "widened by" in row["reason"]
    stood = float(row["noise_margin"]) - (distance if widened else 0.0)
    other = max(stood, distance)
    bands = (stood, other) if abs(a) <= abs(b) else (other, stood)
    verdict = replicated(_judged(math.exp(a), bands[0]), _judged(math.exp(b), bands[1]))
    return kind(verdict.verdict, verdict.unmeasured), verdict.speedup_vs_incumbent


def _cv(figures: list[float]) -> float | None:
    return statistics.stdev(figures) / statistics.mean(figures) if len(figures) > 1 else None


def _pct(cv: float | None) -> str:
    return "-" if cv is None else f"{cv:.1%}"


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
    figures: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        name = f"{row['condition']} {row['pair']}"
        cell = table.setdefault(name, {"stored": Counter(), "rescored": Counter()})
        given = figures.setdefault(name, {"stored": [], "rescored": []})
        cell["stored"][kind(row["verdict"], bool(row.get("unmeasured")))] += 1
        if not row.get("unmeasured") and row.get("speedup_vs_incumbent") is not None:
            given["stored"].append(row["speedup_vs_incumbent"])
        verdict, figure = rescore(row)
        cell["rescored"][verdict] += 1
        if figure is not None:
            given["rescored"].append(figure)
    report = {}
    for name, cell in table.items():
        right = RIGHT[name.split()[1]]
        report[name] = {
            arm: {
                **dict(counts),
                "false": sum(n for k, n in counts.items() if k in ("KEEP", "REVERT") and k != right),
                "cv": _cv(figures[name][arm]),
            }
            for arm, counts in cell.items()
        }
    if args.json:
        print(json.dumps(report))
        return
    for name, arms in report.items():
        line = "  ".join(
            f"{arm}: "
            + "/".join(str(arms[arm].get(k, 0)) for k in ("KEEP", "ACCEPT", "REVERT", "not measured"))
            + f" false {arms[arm]['false']} CV {_pct(arms[arm]['cv'])}"
            for arm in ("stored", "rescored")
        )
        print(f"{name:24} {line}")
    print("(K/A/R/not measured)")


if __name__ == "__main__":
    main()
