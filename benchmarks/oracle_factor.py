"""How large honest float32 errors get, and dishonest ones: the guard's ORACLE_FACTOR and ROUNDING_FACTOR.

    python benchmarks/oracle_factor.py [--seeds 30] [--lengths 1024,4096,16384,65536] [--rows 256] [--json]

Per reduction length n and seed, for inputs drawn with randn, rand and rand - 0.5: three
references in float32 on one thread, as the guard's parent runs them (torch.sum over rows
of a rows x n matrix, the matrix-vector product x @ ones, a 32 x n by n x 32 matmul), their
float64 oracle, and honest float32 candidates: C through kernelkiln.native (row sums: a
sequential loop, blocks of 256, 8 accumulators, AVX2 intrinsics where this CPU has AVX2,
the sequential loop under -ffast-math; matmuls: a naive loop, the same with FMA
contraction where this CPU has FMA, k blocked by 256) and the reference's own torch call
on every core. Then dishonest outputs: float16 and bfloat16 computations cast back, a
1e-3 relative error, one element off by 1% of the output's RMS, the previous seed's result
(stale) and zeros.

For each output, the factor it needs to pass, elementwise and in L2 (0 where the task's
tolerance already suffices), against two yardsticks: the reference's own error against
the oracle ("own"), and what rounding the inputs once more changes in the oracle's result
("rounding"). The guard lets an output through when either yardstick times its factor
covers it, so the figures that matter are how much smaller both factors could be before
an honest output fails ("honest safety") and how much larger before a dishonest one
passes ("dishonest margin"). check.compare, the guard's rule itself, then judges every
output, and the old rule (the float32 reference with the task's tolerance) the honest ones.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from kernelkiln import native
from kernelkiln.guard.correctness.check import compare
from kernelkiln.guard.correctness.oracle import ORACLE_FACTOR, ROUNDING_FACTOR, Oracle, Spread, exact_outputs
from kernelkiln.native.toolchain import cpu_identity
from kernelkiln.task import bundled_suites, load_task

ROW_SUM = "void(const float*, float*, int64_t, int64_t)"
MATMUL = "void(const float*, const float*, float*, int64_t, int64_t, int64_t)"
ATOL = RTOL = 1e-4  # the float32 default tolerance (kernelkiln.task.model)
DISTRIBUTIONS = ("randn", "rand", "rand-0.5")

SEQUENTIAL = r"""
#include <stdint.h>
void row_sum(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float s = 0.0f;
        for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c];
        y[r] = s;
    }
}
"""
BLOCKED = r"""
#include <stdint.h>
void row_sum(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float total = 0.0f;
        for (int64_t b = 0; b < cols; b += 256) {
            float s = 0.0f;
            for (int64_t c = b; c < b + 256 && c < cols; ++c) s += x[r * cols + c];
            total += s;
        }
        y[r] = total;
    }
}
"""
ACCUMULATORS = r"""
#include <stdint.h>
void row_sum(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float a[8] = {0};
        int64_t c = 0;
        for (; c + 8 <= cols; c += 8)
            for (int k = 0; k < 8; ++k) a[k] += xr[c + k];
        for (; c < cols; ++c) a[0] += xr[c];
        y[r] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    }
}
"""
AVX2 = r"""
#include <immintrin.h>
#include <stdint.h>
void row_sum(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        int64_t c = 0;
        for (; c + 32 <= cols; c += 32) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(xr + c));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(xr + c + 8));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(xr + c + 16));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(xr + c + 24));
        }
        __m256 v = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
        float lanes[8];
        _mm256_storeu_ps(lanes, v);
        float s = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
        for (; c < cols; ++c) s += xr[c];
        y[r] = s;
    }
}
"""
NAIVE_MATMUL = r"""
#include <stdint.h>
void matmul(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
    for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
            float s = 0.0f;
            for (int64_t t = 0; t < k; ++t) s += a[i * k + t] * b[t * n + j];
            c[i * n + j] = s;
        }
}
"""
BLOCKED_MATMUL = r"""
#include <stdint.h>
void matmul(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n) {
    for (int64_t i = 0; i < m * n; ++i) c[i] = 0.0f;
    for (int64_t kb = 0; kb < k; kb += 256)
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                float s = 0.0f;
                for (int64_t t = kb; t < kb + 256 && t < k; ++t) s += a[i * k + t] * b[t * n + j];
                c[i * n + j] += s;
            }
}
"""


def _cpu_has(*features: str) -> bool:
    flags = next((part.split("=", 1)[1].split() for part in cpu_identity().split("|") if part.startswith("flags=")), [])
    return all(f in flags for f in features)


def _row_sum(source: str, flags: tuple[str, ...] = ()) -> Callable[[torch.Tensor], torch.Tensor]:
    lib = native.load(source, {"row_sum": ROW_SUM}, flags=list(flags))

    def run(x: torch.Tensor) -> torch.Tensor:
        y = torch.empty(x.shape[0])
        lib.row_sum(x, y, x.shape[0], x.shape[1])
        return y

    return run


def _matmul(source: str, flags: tuple[str, ...] = ()) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    lib = native.load(source, {"matmul": MATMUL}, flags=list(flags))

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        c = torch.empty(a.shape[0], b.shape[1])
        lib.matmul(a, b, c, a.shape[0], a.shape[1], b.shape[1])
        return c

    return run


def _all_cores(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    def run(*args: torch.Tensor) -> torch.Tensor:
        torch.set_num_threads(os.cpu_count() or 1)
        try:
            return fn(*args)
        finally:
            torch.set_num_threads(1)

    return run


def candidates() -> tuple[dict[str, Callable], dict[str, Callable], list[str]]:
    """Honest row sums and matmuls by name, and what was left out on this CPU."""
    sums = {
        "sequential": _row_sum(SEQUENTIAL),
        "blocked256": _row_sum(BLOCKED),
        "accumulators8": _row_sum(ACCUMULATORS),
        "fast_math": _row_sum(SEQUENTIAL, ("-O3", "-march=native", "-ffast-math")),
    }
    skipped = []
    if _cpu_has("avx2"):
        sums["avx2"] = _row_sum(AVX2, ("-mavx2",))
    else:
        skipped.append("avx2 (this CPU lacks AVX2)")
    mms = {"naive": _matmul(NAIVE_MATMUL), "k_blocked256": _matmul(BLOCKED_MATMUL)}
    if _cpu_has("fma"):
        mms["naive_fma"] = _matmul(NAIVE_MATMUL, ("-mfma", "-ffp-contract=fast"))
    else:
        skipped.append("naive_fma (this CPU lacks FMA)")
    return sums, mms, skipped


class _Sum(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(1)


class _MatVec(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ torch.ones(x.shape[1], dtype=x.dtype)


class _MatMul(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


def _required(out: torch.Tensor, x: torch.Tensor, yardstick: Spread) -> tuple[float, float]:
    """The smallest f for which ``out`` passes max(tolerance, f x ``yardstick``), elementwise and in L2.

    0: the tolerance suffices.
    """
    d = (out.double() - x).abs()
    over = d[d > ATOL + RTOL * x.abs()]
    elem = float(over.max()) / yardstick.largest if over.numel() else 0.0
    error = float(torch.linalg.vector_norm(d))
    l2 = error / yardstick.l2 if error / float(torch.linalg.vector_norm(x)) > RTOL else 0.0
    return elem, l2


def _scale_needed(own: tuple[float, float], rounding: tuple[float, float]) -> float:
    """How much both factors would have to be scaled for the output to pass (>1: it fails as configured)."""
    return max(min(o / ORACLE_FACTOR, r / ROUNDING_FACTOR) for o, r in zip(own, rounding, strict=False))


def _dishonest(
    out: torch.Tensor, half: torch.Tensor, bf16: torch.Tensor, stale: torch.Tensor | None
) -> dict[str, torch.Tensor]:
    one = out.clone().reshape(-1)
    one[one.numel() // 2] += 0.01 * float(out.double().pow(2).mean().sqrt())
    wrong = {
        "float16": half,
        "bfloat16": bf16,
        "relative_1e-3": out * (1 + 1e-3),
        "one_element": one.reshape(out.shape),
        "zeroed": torch.zeros_like(out),
    }
    if stale is not None:
        wrong["stale"] = stale
    return wrong


def _draw(dist: str, gen: torch.Generator, *shape: int) -> torch.Tensor:
    if dist == "randn":
        return torch.randn(*shape, generator=gen)
    return torch.rand(*shape, generator=gen) - (0.5 if dist == "rand-0.5" else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--lengths", default="1024,4096,16384,65536", help="reduction lengths, comma-separated")
    parser.add_argument("--rows", type=int, default=256, help="row-sum outputs (the matmul's are 32 x 32)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    torch.set_num_threads(1)
    task = load_task(bundled_suites()["examples"].path / "row_sum.py")  # default float32 tolerance
    sums, mms, skipped = candidates()
    references = {"sum": _Sum(), "matvec": _MatVec(), "matmul": _MatMul()}
    oracles = {name: Oracle() for name in references}
    honest: dict[str, list[tuple[float, float, float, float]]] = defaultdict(list)  # own elem/L2, rounding elem/L2
    wrong: dict[str, list[tuple[float, float, float, float]]] = defaultdict(list)
    honest_failures, dishonest_passes, old_rule_failures, judged = [], [], defaultdict(int), 0
    worst_honest, least_dishonest = (0.0, ""), (float("inf"), "")
    for n in [int(v) for v in args.lengths.split(",")]:
        for dist in DISTRIBUTIONS:
            previous: dict[str, torch.Tensor] = {}
            for seed in range(args.seeds):
                gen = torch.Generator().manual_seed(seed * 7919 + n)
                x, a, b = _draw(dist, gen, args.rows, n), _draw(dist, gen, 32, n), _draw(dist, gen, n, 32)
                trials = {"sum": ([x], sums), "matvec": ([x], sums), "matmul": ([a, b], mms)}
                for case, (inputs, kernels) in trials.items():
                    model, oracle = references[case], oracles[case]
                    ref = model(*inputs)
                    [exact] = exact_outputs(
                        [ref],
                        oracle.outputs(model, inputs, [ref]),
                        lambda: oracle.perturbed(inputs),  # noqa: B023 - called here
                    )
                    value, own, moved = exact.value, exact.own, exact.rounding()
                    outs = {k: f(*inputs) for k, f in kernels.items()}
                    outs["torch_all_cores"] = _all_cores(model)(*inputs)
                    for name, out in outs.items():
                        key = f"{case}/{name}/{dist}/{n}"
                        need = _required(out, value, own) + _required(out, value, moved)
                        honest[f"{case}/{name}/{n}"].append(need)
                        if _scale_needed(need[:2], need[2:]) > worst_honest[0]:
                            worst_honest = (_scale_needed(need[:2], need[2:]), key)
                        judged += 1
                        if compare(task, ref, out, key, exact):
                            honest_failures.append(f"{key} seed {seed}")
                        if compare(task, ref, out, key):
                            old_rule_failures[f"{case}/{name}/{n}"] += 1
                    half, bf16 = (
                        model(*[t.half() for t in inputs]).float(),
                        model(*[t.bfloat16() for t in inputs]).float(),
                    )
                    base = outs[next(iter(kernels))]
                    for kind, out in _dishonest(base, half, bf16, previous.get(case)).items():
                        need = _required(out, value, own) + _required(out, value, moved)
                        wrong[f"{case}/{kind}/{n}"].append(need)
                        if _scale_needed(need[:2], need[2:]) < least_dishonest[0]:
                            least_dishonest = (_scale_needed(need[:2], need[2:]), f"{case}/{kind}/{dist}/{n}")
                        if compare(task, ref, out, kind, exact) is None:
                            dishonest_passes.append(f"{kind} on {case}/{dist}/{n} seed {seed}")
                    previous[case] = base

    half = [t for k, v in wrong.items() if k.split("/")[1] == "float16" for t in v]

    def top(rows: dict[str, list[tuple[float, ...]]], pick: Callable) -> dict[str, list[float]]:
        return {k: [round(pick(t[i] for t in v), 1) for i in range(4)] for k, v in sorted(rows.items())}

    result = {
        "oracle_factor": ORACLE_FACTOR,
        "rounding_factor": ROUNDING_FACTOR,
        "honest_safety": round(1 / worst_honest[0], 2) if worst_honest[0] else None,
        "honest_tightest": worst_honest[1],
        "dishonest_margin": round(least_dishonest[0], 2),
        "dishonest_tightest": least_dishonest[1],
        "honest_largest_own": round(max(max(t[0], t[1]) for v in honest.values() for t in v), 1),
        "honest_largest_rounding": round(max(max(t[2], t[3]) for v in honest.values() for t in v), 1),
        "half_smallest_own": round(min(max(t[0], t[1]) for t in half), 1),
        "half_smallest_rounding": round(min(max(t[2], t[3]) for t in half), 1),
        "honest_judged": judged,
        "honest_failures": honest_failures,
        "old_rule_failures": dict(old_rule_failures),
        "dishonest_passes": dishonest_passes,
        "honest": top(honest, max),
        "dishonest": top(wrong, min),
        "skipped": skipped,
        "rows": args.rows,
        "seeds": args.seeds,
        "distributions": list(DISTRIBUTIONS),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        "required factors, 0 where the tolerance suffices: own = x the reference's own error, "
        "rounding = x what rounding the inputs once more changes (honest: largest; dishonest: smallest)"
    )
    print(f"{'':38} {'own elem':>10} {'own L2':>10} {'round elem':>11} {'round L2':>10}")
    for title, rows in (("honest", result["honest"]), ("dishonest", result["dishonest"])):
        print(title)
        for key, v in rows.items():
            print(f"  {key:36} {v[0]:>10.1f} {v[1]:>10.1f} {v[2]:>11.1f} {v[3]:>10.1f}")
    honest_line = (
        f"honest outputs pass with both factors {result['honest_safety']}x smaller (tightest {worst_honest[1]})"
        if worst_honest[0]
        else "honest outputs pass on the tolerance alone"
    )
    print(
        f"\nORACLE_FACTOR {ORACLE_FACTOR:g}, ROUNDING_FACTOR {ROUNDING_FACTOR:g}: {honest_line}; dishonest ones "
        f"fail until both are {result['dishonest_margin']}x larger (tightest {least_dishonest[1]})"
    )
    print(
        f"largest honest need: {result['honest_largest_own']} x own error, {result['honest_largest_rounding']} x "
        f"rounding; smallest half-precision need: {result['half_smallest_own']} x own, "
        f"{result['half_smallest_rounding']} x rounding"
    )
    print(
        f"honest outputs rejected: {len(honest_failures)} of {judged} by the guard's rule "
        f"{honest_failures[:3]}; {sum(old_rule_failures.values())} by the old rule"
    )
    print(f"dishonest outputs passed: {len(dishonest_passes)} {dishonest_passes[:5]}")
    if skipped:
        print("skipped:", ", ".join(skipped))


if __name__ == "__main__":
    main()
