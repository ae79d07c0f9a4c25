#!/usr/bin/env bash
# The replayed studies of docs/SPACES.md over every task of benchmarks/data/spaces-cpu.jsonl (build it with
# benchmarks/spaces_cpu.sh). Each study is a resumable `kiln ablate` (run again to continue); its summary is
# copied to benchmarks/figures/. STUDY_DIR (default /tmp/kiln-studies) holds the runs: tens of MB, not kept.
#
#   benchmarks/replay_studies.sh held-out   # memory task out / family out and the generic portfolio vs empty,
#                                           # on the tasks whose space is not flat from the seed
#   benchmarks/replay_studies.sh held-out-parts  # memory task out without experiences, with one neighbour, with
#                                           # the cost model, each over memory as it is (same tasks; shares runs)
#   benchmarks/replay_studies.sh held-out-all  # the same over every task, flat ones kept (--keep-flat)
#   benchmarks/replay_studies.sh mechanisms # memory (cross-fitted), credit, rules, search, reuse
#   benchmarks/replay_studies.sh set-aside  # the search with the set-aside rule before 2026-12-06 (TRAILS off)
set -euo pipefail
cd "$(dirname "$0")/.."
data=${DATA:-benchmarks/data/spaces-cpu.jsonl}
dir=${STUDY_DIR:-/tmp/kiln-studies}
kiln=${KILN:-.venv/bin/kiln}
repeat=${REPEAT:-20}
suites=cpu,examples,kb-cpu,benchmarks/tasks/widths
jobs=${JOBS:-2}  # repeats side by side: the figures do not depend on it
common=(--replay "$data" --budget 20 --budgets 5,10 --repeat "$repeat" --jobs "$jobs")
case ${1:?held-out, held-out-parts, held-out-all, mechanisms or set-aside} in
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
    "$kiln" ablate "$suites" --keep-flat --study memory --study credit --study rules --study search --study reuse \
      "${common[@]}" --out "$dir/mechanisms" --json > benchmarks/figures/replay-cpu30-mechanisms.json ;;
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
  *) echo "unknown study $1" >&2; exit 2 ;;
esac
