#!/usr/bin/env bash
# The GPU check: one short run (at most 475 s of step limits, under 8 minutes) on a machine with an NVIDIA GPU.
#
#   scripts/gpu_check.sh [WHEELS_DIR]        figures go to ${OUT:-gpu-check}/gpu_figures.json
#
# It installs kernelkiln with its test and GPU extras (from WHEELS_DIR when given, e.g.
# a folder holding torch and triton wheels for this machine, else from the index), then:
#   1. the guard's GPU tests and the Triton/CUDA tests (they skip nothing on a GPU);
#   2. the guard's throughput and stability benchmarks on the bundled Triton row softmax;
#   3. the tuner on the GPU examples (row_softmax, layer_norm, matmul; 10 evaluations each);
# and writes every figure into one JSON file. Each step has its own time limit, so one
# slow step cannot eat the others' time; a failed step is recorded, not fatal.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-check}
WHEELS=${1:-}
mkdir -p "$OUT"
FIG="$OUT/gpu_figures.json"
LOG="$OUT/gpu_check.log"
: > "$LOG"
START=$(date +%s)

note() { echo "[$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }

PY=${PYTHON:-python3}
if [ ! -x .venv-gpu/bin/python ]; then
  note "creating .venv-gpu"
  $PY -m venv .venv-gpu >>"$LOG" 2>&1
fi
PIP=(.venv-gpu/bin/pip install -q)
if [ -n "$WHEELS" ]; then PIP+=(--find-links "$WHEELS"); fi
note "installing (torch with CUDA, triton, kernelkiln[test,gpu])"
timeout 120 "${PIP[@]}" torch triton >>"$LOG" 2>&1 || note "torch/triton install failed (see $LOG)"
timeout 45 "${PIP[@]}" -e ".[test,gpu]" >>"$LOG" 2>&1 || note "kernelkiln install failed (see $LOG)"
K=.venv-gpu/bin
$K/python -c "import torch; assert torch.cuda.is_available(), 'no GPU visible'; print(torch.cuda.get_device_name(0))" \
  >>"$LOG" 2>&1 || { note "no usable GPU: stopping"; echo '{"error": "no usable GPU"}' > "$FIG"; exit 1; }

step() {  # step NAME SECONDS COMMAND...: run with a limit, keep stdout as NAME.out
  local name=$1 limit=$2; shift 2
  note "step $name (limit ${limit}s)"
  timeout "$limit" "$@" > "$OUT/$name.out" 2>>"$LOG"
  echo $? > "$OUT/$name.rc"
  note "step $name: exit $(cat "$OUT/$name.rc")"
}

step gpu_tests 100 $K/python -m pytest -q tests/guard/test_triton.py tests/native/test_cuda_build.py tests/platforms
step throughput 40 $K/python benchmarks/guard_throughput.py --json --platform cuda --candidates 3 \
  --task kernelkiln/examples/row_softmax.py --candidate kernelkiln/examples/seeds/row_softmax_triton.py
step stability 50 $K/python benchmarks/guard_stability.py --json --platform cuda --trials 6 \
  --task kernelkiln/examples/row_softmax.py --candidate kernelkiln/examples/seeds/row_softmax_triton.py
for task in row_softmax layer_norm matmul; do
  step "tuner_$task" 40 $K/kiln optimize "$task" --platform cuda --budget 10 --time-budget 3 --json \
    --store "sqlite:///$PWD/$OUT/kiln.db" --out "$OUT/runs"
done

$K/python - "$OUT" "$FIG" <<'PY'
import json, pathlib, sys
out, fig = pathlib.Path(sys.argv[1]), sys.argv[2]
figures = {}
for rc in sorted(out.glob("*.rc")):
    name = rc.stem
    text = (out / f"{name}.out").read_text() if (out / f"{name}.out").exists() else ""
    try:
        body = json.loads(text)
    except ValueError:
        body = text[-4000:]
    figures[name] = {"exit": int(rc.read_text().strip() or 1), "result": body}
import torch
figures["device"] = torch.cuda.get_device_name(0)
pathlib.Path(fig).write_text(json.dumps(figures, indent=2) + "\n")
print(fig)
PY
note "done: $FIG"
