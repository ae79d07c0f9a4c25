"""Cold vs warm time to build and load a small C kernel with kernelkiln.native.

    python benchmarks/native_compile.py [--reps 5] [--json]

cold:  load() of source never seen before (compile + publish to cache + dlopen + bind)
warm:  load() of source already in the on-disk cache (key + lookup + bind)
memo:  load() repeated in the same process with the same builder (bind only)
Each figure is the median over --reps runs, measured side by side in one process
against a fresh temporary cache directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from kernelkiln.native import load, set_builder

KERNEL = """\
#include <stdint.h>
/* nonce %d */
void row_sum(const float* x, float* out, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float s = 0.0f;
        for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c];
        out[r] = s;
    }
}
"""
SIGNATURE = {"row_sum": "void(const float*, float*, int64_t, int64_t)"}


def _timed(source: str) -> float:
    started = time.perf_counter()
    load(source, SIGNATURE)
    return time.perf_counter() - started


def measure(reps: int) -> dict[str, float | int | str]:
    cold, warm, memo = [], [], []
    nonce = time.time_ns()
    for rep in range(reps):
        source = KERNEL % (nonce + rep)
        set_builder(None)
        cold.append(_timed(source))
        set_builder(None)  # forget in-process build results: next load hits the disk cache
        warm.append(_timed(source))
        memo.append(_timed(source))
        lib = load(source, SIGNATURE)
        x, out = torch.randn(8, 16), torch.empty(8)
        lib.row_sum(x, out, 8, 16)
        torch.testing.assert_close(out, x.sum(dim=1))
    return {
        "reps": reps,
        "cold_s": statistics.median(cold),
        "warm_s": statistics.median(warm),
        "memo_s": statistics.median(memo),
        "cold_max_s": max(cold),
        "warm_max_s": max(warm),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    cache = tempfile.mkdtemp(prefix="kiln-bench-")
    os.environ["KILN_CACHE_DIR"] = cache
    try:
        figures = measure(max(1, args.reps))
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"native build+load of a small C kernel (median of {figures['reps']}):")
        print(f"  cold (compile)      {figures['cold_s'] * 1e3:9.2f} ms")
        print(f"  warm (disk cache)   {figures['warm_s'] * 1e3:9.2f} ms")
        print(f"  memo (same process) {figures['memo_s'] * 1e3:9.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
