"""This machine's measured peaks (``kiln machine``): memory bandwidth and FP32 FLOP/s per core count.

Bandwidth is a STREAM triad ``a[i] = b[i] + s*c[i]`` over arrays well beyond the last-level
cache, counted the STREAM way (3 x 4 B per element; the write-allocate figure, 4 x 4 B,
rides along). FLOP/s is a loop of independent vector FMAs held in registers (2 FLOPs per
lane per FMA). Both run as C through ``kernelkiln.native`` with OpenMP, best of several
repetitions, at 1, 2, 4, ... cores, all cores, and the guard's default (all but one).
The record is cached as JSON per CPU; ``load_peaks`` reads it, ``measure`` makes it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import platform
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from kernelkiln.atomic import write_atomic
from kernelkiln.platforms.host import default_threads, last_level_cache_bytes

SCHEMA = 1
MIN_ARRAY_BYTES = 64 << 20  # per triad array, whatever the cache size
TRIAD_REPS = 20
FMA_REPS = 5
FMA_TARGET_S = 0.1  # seconds per FMA repetition; the iteration count grows until one run takes this long
FLAGS = ("-O3", "-march=native", "-fopenmp", "-ffp-contract=fast", "-lgomp")

_SOURCE = r"""
#include <stdint.h>
#include <time.h>

#if defined(__AVX512F__)
#define LANES 16
#define ACC 24
#elif defined(__AVX__)
#define LANES 8
#define ACC 12
#else
#define LANES 4
#define ACC 8
#endif

typedef float vec __attribute__((vector_size(LANES * sizeof(float))));

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Threads OpenMP really gives a region asking for `threads` (OMP_THREAD_LIMIT may cap it). */
int team_size(int threads) {
    extern int omp_get_num_threads(void);
    int size = 1;
    #pragma omp parallel num_threads(threads)
    {
        #pragma omp single
        size = omp_get_num_threads();
    }
    return size;
}

int fma_lanes(void) { return LANES; }
int fma_accumulators(void) { return ACC; }

void triad_init(float* a, float* b, float* c, int64_t n, int threads) {
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; ++i) { a[i] = 0.0f; b[i] = 1.0f; c[i] = 2.0f; }
}

/* Best seconds of `reps` triads; the first pass is a warm-up. */
double triad(float* restrict a, const float* restrict b, const float* restrict c,
             int64_t n, float s, int threads, int reps) {
    double best = 1e300;
    for (int r = 0; r <= reps; ++r) {
        double t0 = now();
        #pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
        double t = now() - t0;
        if (r > 0 && t < best) best = t;
    }
    return best;
}

/* Seconds for `iters` rounds of ACC independent vector FMAs on each of `threads` threads. */
double fma_loop(int64_t iters, int threads, float m, float add, float* out) {
    double t0 = now();
    #pragma omp parallel num_threads(threads)
    {
        extern int omp_get_thread_num(void);
        int id = omp_get_thread_num();
        vec acc[ACC];
        vec vm = (vec){} + m, va = (vec){} + add;
        for (int k = 0; k < ACC; ++k) acc[k] = (vec){} + (float)(k + id);
        for (int64_t i = 0; i < iters; ++i) {
            #pragma GCC unroll 32
            for (int k = 0; k < ACC; ++k) acc[k] = acc[k] * vm + va;
        }
        vec s = acc[0];
        for (int k = 1; k < ACC; ++k) s += acc[k];
        float total = 0.0f;
        for (int l = 0; l < LANES; ++l) total += s[l];
        out[id] = total;
    }
    return now() - t0;
}
"""

_FUNCTIONS = {
    "team_size": "int(int)",
    "fma_lanes": "int()",
    "fma_accumulators": "int()",
    "triad_init": "void(float*, float*, float*, int64_t, int)",
    "triad": "double(float*, const float*, const float*, int64_t, float, int, int)",
    "fma_loop": "double(int64_t, int, float, float, float*)",
}

Progress = Callable[[str], None]


@dataclass(frozen=True)
class MachineRecord:
    """Measured peaks of one machine; ``bandwidth_gbs``/``peak_gflops`` are at ``cores`` cores."""

    cpu: str
    cpu_key: str
    cpu_count: int
    cores: int
    bandwidth_gbs: float
    peak_gflops: float
    per_cores: dict[str, dict[str, float]]
    measured_at: str  # ISO 8601, UTC
    kernelkiln_version: str
    kernel: str = ""  # e.g. "256-bit vectors, 12 FMA accumulators"
    array_mib: float = 0.0
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    schema: int = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MachineRecord:
        known = {f.name for f in fields(cls)}
        kept = {k: v for k, v in data.items() if k in known}
        kept["notes"] = tuple(kept.get("notes", ()))
        return cls(**kept)


def cpu_key() -> str:
    """Cache key of this machine: the native cache's CPU identity plus the core count."""
    from kernelkiln.native.toolchain import cpu_identity

    text = f"{cpu_identity()}|cpus={os.cpu_count() or 1}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def cpu_name() -> str:
    """The CPU's model name (Linux ``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cache_path(key: str | None = None) -> Path:
    """Where this machine's record lives: ``$KILN_CACHE_DIR`` (else the user cache) ``/machine/<key>.json``."""
    env = os.environ.get("KILN_CACHE_DIR")
    if env:
        root = Path(env)
    else:
        import platformdirs

        root = Path(platformdirs.user_cache_dir("kernelkiln"))
    return root / "machine" / f"{key or cpu_key()}.json"


def load_peaks() -> MachineRecord | None:
    """The cached record for this machine, or None when not measured (or unreadable)."""
    key = cpu_key()
    try:
        data = json.loads(cache_path(key).read_text(encoding="utf-8"))
        record = MachineRecord.from_dict(data)
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    if record.schema != SCHEMA or record.cpu_key != key:
        return None
    return record


_FIRST_USE = threading.Lock()
_failed: list[str] = []  # why measuring on first use failed in this process (it is not tried again)


def first_use() -> tuple[MachineRecord | None, str]:
    """This machine's record, measured and cached on first use (once per process); else None and why.

    The guard's speed-of-light check needs the peaks on every verdict, so they cannot wait
    for someone to run `kiln machine`: without them a figure ten times beyond the machine's
    FMA peak went unnoticed. Measuring takes a few seconds, once per machine.
    """
    record = load_peaks()
    if record is not None:
        return record, ""
    with _FIRST_USE:
        record = load_peaks()
        if record is None and not _failed:
            try:
                record = measure(refresh=True)
            except Exception as exc:  # no compiler, no OpenMP, a read-only cache: the check goes without
                _failed.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return record, (_failed[0] if record is None and _failed else "")


def core_counts(cpus: int, default: int) -> list[int]:
    """1, then powers of two up to ``cpus``, plus ``cpus`` and ``default``."""
    counts = {cpus, max(1, min(default, cpus))}
    n = 1
    while n <= cpus:
        counts.add(n)
        n *= 2
    return sorted(counts)


def cores_text(n: int) -> str:
    """``"1 core"``, ``"4 cores"``."""
    return f"{n} core{'' if n == 1 else 's'}"


def default_array_bytes() -> int:
    """Bytes per triad array: 4x the last-level cache, at least 64 MiB, within an eighth of free memory."""
    wanted = max(MIN_ARRAY_BYTES, 4 * last_level_cache_bytes())
    free = _available_memory()
    return min(wanted, free // 8) if free else wanted


def measure(
    refresh: bool = False,
    *,
    progress: Progress | None = None,
    array_bytes: int | None = None,
    fma_target_s: float = FMA_TARGET_S,
    triad_reps: int = TRIAD_REPS,
    fma_reps: int = FMA_REPS,
    store: bool = True,
) -> MachineRecord:
    """This machine's record: the cached one unless ``refresh``, else measured now (and stored).

    Size parameters exist for tests; the defaults are for real use (about a second per
    core count). ``progress`` receives one line per step.
    """
    if not refresh:
        cached = load_peaks()
        if cached is not None:
            return cached
    record = _measure(
        progress or (lambda _line: None), array_bytes or default_array_bytes(), fma_target_s, triad_reps, fma_reps
    )
    if store:
        write_atomic(cache_path(), json.dumps(record.to_dict(), indent=2) + "\n")
    return record


def _measure(
    progress: Progress, array_bytes: int, fma_target_s: float, triad_reps: int, fma_reps: int
) -> MachineRecord:
    import torch

    from kernelkiln import __version__, native

    started = time.perf_counter()
    progress("compiling the triad and FMA kernels")
    lib = native.load(_SOURCE, _FUNCTIONS, flags=list(FLAGS))
    lanes, accumulators = lib.fma_lanes(), lib.fma_accumulators()
    cpus = os.cpu_count() or 1
    default = lib.team_size(min(default_threads(), cpus))
    n = max(1024, array_bytes // 4)
    per_cores: dict[str, dict[str, float]] = {}
    for threads in sorted({lib.team_size(count) for count in core_counts(cpus, default)}):
        progress(f"triad on {cores_text(threads)} ({3 * n * 4 / 2**20:.0f} MiB)")
        arrays = [torch.empty(n, dtype=torch.float32) for _ in range(3)]
        lib.triad_init(*arrays, n, threads)
        best_s = lib.triad(*arrays, n, 3.0, threads, triad_reps)
        del arrays
        progress(f"FMA loop on {cores_text(threads)}")
        flops_per_iter = 2 * lanes * accumulators * threads
        fma_s, iters = _fma_best(lib, threads, fma_target_s, fma_reps)
        per_cores[str(threads)] = {
            "bandwidth_gbs": _rate(3 * 4 * n, best_s),
            "bandwidth_write_allocate_gbs": _rate(4 * 4 * n, best_s),
            "peak_gflops": _rate(flops_per_iter * iters, fma_s),
        }
    top = per_cores[str(default)]
    isa = f"{lanes * 32}-bit vectors"
    return MachineRecord(
        cpu=cpu_name(),
        cpu_key=cpu_key(),
        cpu_count=cpus,
        cores=default,
        bandwidth_gbs=top["bandwidth_gbs"],
        peak_gflops=top["peak_gflops"],
        per_cores=per_cores,
        measured_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        kernelkiln_version=__version__,
        kernel=f"{isa}, {accumulators} FMA accumulators",
        array_mib=round(n * 4 / 2**20, 1),
        seconds=round(time.perf_counter() - started, 2),
        notes=(
            (
                "bandwidth_gbs counts 3 x 4 B per triad element (STREAM); bandwidth_write_allocate_gbs "
                "counts 4 x 4 B (the store's read for ownership)"
            ),
            f"top-level figures are at {cores_text(default)}, the guard's default (all but one)",
        ),
    )


def _fma_best(lib: Any, threads: int, target_s: float, reps: int) -> tuple[float, int]:
    """Best seconds of ``reps`` FMA runs, with the iteration count grown until a run takes ``target_s``."""
    import torch

    out = torch.zeros(max(threads, 1), dtype=torch.float32)
    iters = 1 << 10
    seconds = lib.fma_loop(iters, threads, 0.999999, 1e-6, out)
    while seconds < target_s and iters < 1 << 40:
        iters *= 2 if seconds <= 0 else max(2, min(64, int(target_s / seconds * 1.2)))
        seconds = lib.fma_loop(iters, threads, 0.999999, 1e-6, out)
    best = seconds
    for _ in range(reps - 1):
        best = min(best, lib.fma_loop(iters, threads, 0.999999, 1e-6, out))
    return best, iters


def _rate(units: float, seconds: float) -> float:
    """``units`` per second in billions (GB/s, GFLOP/s), rounded; 0.0 when the time is not usable."""
    if not seconds or seconds <= 0 or not math.isfinite(seconds):
        return 0.0
    return round(units / seconds / 1e9, 2)


def _available_memory() -> int:
    """MemAvailable from /proc/meminfo in bytes (0 when unknown)."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
