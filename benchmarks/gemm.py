"""The generated GEMM kernel against torch.matmul, side by side in one run, as ratios.

    python benchmarks/gemm.py [--json] [--rounds R] [--threads T] [--models]

For each shape (square 256, 512, 1024, a rectangular and a skinny one) and each thread
count (1 and the guard's default, or T), the candidate `kiln seed` generates for
``torch.matmul(A, B)`` (its default knobs: the GEMM micro-kernel the CPU's features
choose) and torch.matmul (MKL/oneDNN on x86) are timed in alternation, R rounds of a
fixed number of calls each; a round's ratio is torch's time over kernelkiln's (above 1:
kernelkiln faster). Reported: the median ratio over rounds and its interquartile range,
and the largest difference from torch's result relative to the result's scale.

``--models`` adds the products of the whole models ``benchmarks/models.py`` runs (128 tokens;
the weight a parameter, so kernelkiln packs it once, under PREPACK): each as ``x @ W.T``,
timed beside torch eager (MKL, packing the weight on every call) and the ``strongest``
``torch.compile`` configuration (``kernelkiln/model/compilers.py``: frozen, so Inductor hands
MKL a weight it packed once), at kernelkiln's default knobs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from provenance import provenance

from kernelkiln.lowering import generate
from kernelkiln.lowering.gemm import gemm_vocabulary
from kernelkiln.platforms.host import cpu_flags, default_threads
from kernelkiln.testing.lowering import run_candidate, write_task

SHAPES = [
    ("square 256", 256, 256, 256),
    ("square 512", 512, 512, 512),
    ("square 1024", 1024, 1024, 1024),
    ("rectangular 1536x768 @ 768x512", 1536, 768, 512),
    ("skinny 4096x1024 @ 1024x32", 4096, 1024, 32),
]


MODEL_SHAPES = [  # (label, M, K, N): 128 tokens through a layer's weight (N x K)
    ("GPT-2 lm_head 128x768 @ 768x50257", 128, 768, 50257),
    ("Llama lm_head 128x768 @ 768x32000", 128, 768, 32000),
    ("GPT-2/BERT MLP up 128x768 @ 768x3072", 128, 768, 3072),
    ("GPT-2/BERT MLP down 128x3072 @ 3072x768", 128, 3072, 768),
    ("GPT-2 QKV 128x768 @ 768x2304", 128, 768, 2304),
]


def _timed(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def measure(m: int, k: int, n: int, threads: int, rounds: int, directory: Path) -> dict:
    task = write_task(
        directory,
        f"mm_{m}_{k}_{n}",
        "torch.matmul(A, B)",
        {"M": m, "K": k, "N": n},
        "[torch.randn(M, K), torch.randn(K, N)]",
        signature="A, B",
    )
    generated = generate(task, threads=threads)
    model = run_candidate(generated.source)["ModelNew"]()
    a, b = torch.randn(m, k), torch.randn(k, n)
    torch.set_num_threads(threads)
    with torch.no_grad():
        want, got = torch.matmul(a, b), model(a, b)
        error = ((got - want).abs().max() / want.abs().max()).item()
        calls = max(1, int(0.05 / max(_timed(lambda: torch.matmul(a, b), 3), 1e-6)))  # ~50 ms per side per round
        ratios, t_torch, t_kiln = [], [], []
        for _ in range(rounds):
            tt = _timed(lambda: torch.matmul(a, b), calls)
            tk = _timed(lambda: model(a, b), calls)
            t_torch.append(tt)
            t_kiln.append(tk)
            ratios.append(tt / tk)
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    return {
        "m": m,
        "k": k,
        "n": n,
        "threads": threads,
        "kinds": list(generated.kinds),
        "ratio": round(statistics.median(ratios), 3),
        "iqr": [round(q[0], 3), round(q[2], 3)],
        "torch_ms": round(statistics.median(t_torch) * 1e3, 3),
        "kiln_ms": round(statistics.median(t_kiln) * 1e3, 3),
        "gflops_kiln": round(2 * m * n * k / statistics.median(t_kiln) / 1e9, 1),
        "rel_error": error,
    }


def measure_weight(m: int, k: int, n: int, threads: int, rounds: int, directory: Path) -> dict:
    """``x @ W.T`` with W a parameter: kernelkiln's default candidate against eager and strongest."""
    from kernelkiln.model.compilers import wrap

    task = write_task(
        directory, f"linear_{m}_{k}_{n}", "F.linear(x, self.w)", {"M": m, "K": k, "N": n},
        "[torch.randn(M, K)]", init_body=f"self.w = nn.Parameter(torch.randn({n}, {k}) * 0.03)",
    )  # fmt: skip
    generated = generate(task, threads=threads)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    reference = task.make_model(task.workloads[0], 0)
    kiln = task.make_model(task.workloads[0], 0, run_candidate(generated.source)["ModelNew"])
    x = torch.randn(m, k)
    with torch.no_grad():
        strongest = wrap(reference, "strongest")
        arms = {"eager": reference, "strongest": strongest, "kiln": kiln}
        want = reference(x)
        error = max(((f(x) - want).abs().max() / want.abs().max()).item() for f in arms.values())
        calls = max(1, int(0.05 / max(_timed(lambda: reference(x), 3), 1e-6)))
        times: dict[str, list[float]] = {name: [] for name in arms}
        for _ in range(rounds):
            for name, f in arms.items():
                times[name].append(_timed(lambda f=f: f(x), calls))
    over = {base: [b / kt for b, kt in zip(times[base], times["kiln"], strict=True)] for base in ("eager", "strongest")}
    row = {"m": m, "k": k, "n": n, "threads": threads, "rel_error": error}
    for base, ratios in over.items():
        q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
        row[f"vs_{base}"] = round(statistics.median(ratios), 3)
        row[f"vs_{base}_iqr"] = [round(q[0], 3), round(q[2], 3)]
    for name, ts in times.items():
        row[f"{name}_ms"] = round(statistics.median(ts) * 1e3, 3)
    row["gflops_kiln"] = round(2 * m * n * k / statistics.median(times["kiln"]) / 1e9, 1)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--rounds", type=int, default=15, help="alternating rounds per shape (default 15)")
    parser.add_argument("--threads", type=int, default=None, help="the second thread count (default: the guard's)")
    parser.add_argument("--models", action="store_true", help="also the whole models' products against strongest")
    args = parser.parse_args()
    _options, defaults = gemm_vocabulary()
    simd = sorted({"avx512f", "avx2", "fma", "avx"} & cpu_flags())
    counts = sorted({1, args.threads or default_threads()})
    rows, models = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for threads in counts:
            for label, m, k, n in SHAPES:
                row = {"shape": label, **measure(m, k, n, threads, args.rounds, Path(tmp))}
                rows.append(row)
                print(
                    f"{label:34s} threads {threads}: {row['ratio']:.2f}x torch (IQR {row['iqr'][0]:.2f}-"
                    f"{row['iqr'][1]:.2f}; {row['kiln_ms']:.2f} ms vs {row['torch_ms']:.2f} ms, "
                    f"{row['gflops_kiln']} GFLOP/s, rel. error {row['rel_error']:.1e})",
                    file=sys.stderr,
                )
            for label, m, k, n in MODEL_SHAPES if args.models else []:
                row = {"shape": label, **measure_weight(m, k, n, threads, args.rounds, Path(tmp))}
                models.append(row)
                print(
                    f"{label:40s} threads {threads}: {row['vs_eager']:.2f}x eager (IQR {row['vs_eager_iqr'][0]:.2f}-"
                    f"{row['vs_eager_iqr'][1]:.2f}), {row['vs_strongest']:.2f}x strongest (IQR "
                    f"{row['vs_strongest_iqr'][0]:.2f}-{row['vs_strongest_iqr'][1]:.2f}); {row['kiln_ms']:.2f} ms, "
                    f"{row['gflops_kiln']} GFLOP/s, rel. error {row['rel_error']:.1e}",
                    file=sys.stderr,
                )
    out = {
        "provenance": provenance(),
        "cpu_features": simd,
        "micro_kernel": {k: defaults[k] for k in ("MR", "NR")},
        "blocking": {k: defaults[k] for k in ("MC", "KC", "NC")},
        "thread_counts": counts,
        "rounds": args.rounds,
        "torch": torch.__version__,
        "results": rows,
        "model_products": models,
    }
    if args.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
