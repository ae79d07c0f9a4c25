#!/usr/bin/env bash
# The replayed studies of docs/guide/spaces.md over every task of benchmarks/data/spaces-cpu.jsonl (build it with
# benchmarks/spaces_cpu.sh). Each study is a resumable `kiln ablate` (run again to continue); its summary is
# copied to benchmarks/figures/. STUDY_DIR (default /tmp/kiln-studies) holds the runs: tens of MB, not kept.
#
#   benchmarks/replay_studies.sh held-out   # memory task out / family out and the generic portfolio vs empty,
#                                           # on the tasks whose space is not flat from the seed
#   benchmarks/replay_studies.sh held-out-parts  # memory task out without experiences and with one neighbour,
#                                           # each over memory as it is (same tasks; shares runs)
#   benchmarks/replay_studies.sh held-out-all  # the same over every task, flat ones kept (--keep-flat)
#   benchmarks/replay_studies.sh mechanisms # memory (cross-fitted), credit, rules, agents, reuse
#   benchmarks/replay_studies.sh set-aside  # the search with the set-aside rule before 2026-12-06 (TRAILS off)
#   benchmarks/replay_studies.sh fidelity   # six tasks held out with the real guard (K = 3, budget 10: 45 minutes
#                                           # on a quiet 2-core machine), then the same study replayed (K = 50)
set -euo pipefail
cd "$(dirname "$0")/.."
data=${DATA:-benchmarks/data/spaces-cpu.jsonl}
dir=${STUDY_DIR:-/tmp/kiln-studies}
kiln=${KILN:-.venv/bin/kiln}
repeat=${REPEAT:-20}
suites=cpu,examples,kb-cpu,benchmarks/tasks/widths
jobs=${JOBS:-2}  # repeats side by side: the figures do not depend on it
common=(--replay "$data" --budget 20 --budgets 5,10 --repeat "$repeat" --jobs "$jobs")
case ${1:?held-out, held-out-parts, held-out-all, mechanisms, set-aside or fidelity} in
  held-out)
    "$kiln" ablate "$suites" --study held-out "${common[@]}" --out "$dir/held-out-searchable" --json \
      > benchmarks/figures/replay-cpu-searchable-heldout.json ;;
  held-out-parts)
    "$kiln" ablate "$suites" --study held-out --study held-out-parts "${common[@]}" --out "$dir/held-out-searchable" \
      --json > benchmarks/figures/replay-cpu-searchable-heldout-parts.json ;;
  held-out-all)
    "$kiln" ablate "$suites" --study held-out --keep-flat "${common[@]}" --out "$dir/held-out" --json \
      > benchmarks/figures/replay-cpu30-heldout.json ;;
  mechanisms)
    # cross-fitted memory, credit, rules, agents and reuse on the tasks where search matters
    # (no --budgets: two agents' runs are not one agent's prefixes)
    "$kiln" ablate "$suites" --study credit --study rules --study agents --study reuse \
      --replay "$data" --budget 20 --repeat "$repeat" --jobs "$jobs" --out "$dir/mechanisms" --json \
      > benchmarks/figures/replay-cpu-searchable-mechanisms.json ;;
  set-aside)
    # The same search study with the rule of a value that trails its rivals switched off (knobs.TRAILS).
    "$kiln" ablate "$suites" --keep-flat --study search "${common[@]}" --out "$dir/search" --json \
      > benchmarks/figures/replay-cpu30-search.json
    # --jobs 1: a process spawned for a repeat would import knobs afresh, TRAILS unpatched
    .venv/bin/python - "$suites" --keep-flat --study search "${common[@]}" --jobs 1 --out "$dir/search-no-trails" --json \
      > benchmarks/figures/replay-cpu30-search-no-trails.json <<'PY'
import sys
from kernelkiln.task import knobs
from kernelkiln.cli.app import main
knobs.TRAILS = float("inf")  # no value ever trails a rival: the set-aside rule as it was
sys.argv = ["kiln", "ablate", *sys.argv[1:]]
main()
PY
    ;;
  fidelity)
    six=(cpu,examples,benchmarks/tasks/widths --tasks
      softmax,log_softmax,rms_norm,transpose,softmax_256x2048,transpose_512x2048 --study held-out --budget 10)
    # the real guard at the settings of the README's earlier real studies; the dataset's rows were judged whole
    "$kiln" ablate "${six[@]}" --repeat 3 --time-budget 0.3 --confirm-budget 0 --set-config guard.replicate=none \
      --set-config guard.robustness_trials=0 --set-config guard.min_rounds=3 --out "$dir/real-guard-6" --json \
      > benchmarks/figures/real-guard-heldout-6.json
    "$kiln" ablate "${six[@]}" --replay "$data" --keep-flat --repeat 50 --jobs "$jobs" --out "$dir/replay-6" --json \
      > benchmarks/figures/replay-heldout-6.json ;;
  *) echo "unknown study $1" >&2; exit 2 ;;
esac
