"""What the host offers the guard: its cores and its cache geometry (read, never assumed)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

_SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


@functools.cache
def last_level_cache_bytes() -> int:
    """Size of the largest CPU cache (Linux sysfs); 32 MiB if it cannot be read."""
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            raw = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = _SUFFIX.get(raw[-1:].upper(), 1)
        digits = raw.rstrip("KMGkmg")
        if digits.isdigit():
            best = max(best, int(digits) * scale)
    return best or 32 << 20


def _cgroup_cores(path: Path = Path("/sys/fs/cgroup/cpu.max")) -> int | None:
    """Whole cores a cgroup v2 CPU quota grants this process (``"200000 100000"``: 2); None without a quota."""
    try:
        quota, period = path.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max" or not quota.isdigit() or not period.isdigit() or int(period) == 0:
        return None
    return max(1, int(quota) // int(period))


def usable_cores() -> int:
    """Cores this process may really run on: its affinity mask, capped by a cgroup CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cgroup_cores()
    return max(1, min(cores, quota) if quota else cores)


def default_threads() -> int:
    """All usable cores but one: the guard's parent needs a core of its own to time fairly."""
    return max(1, usable_cores() - 1)


def fit_threads(asked: int | None) -> tuple[int, str]:
    """The intra-op threads a timed run may use for ``asked`` (None: the default), and why, when fewer.

    Never more than the usable cores but one: with no core left to the guard, the guard's
    own work and the worker's thread pool fight over the cores, and a multi-threaded
    reference collapses (a 0.2 ms op measured at 13 ms), so every speedup against it is false.
    """
    limit = default_threads()
    if asked is None or asked <= limit:
        return asked or limit, ""
    cores = usable_cores()
    return limit, (
        f"asked for {asked} threads, timed at {limit}: the guard keeps one of this machine's {cores} usable "
        "core(s) for itself (an oversubscribed reference collapses and every speedup against it is false)"
        if cores > 1
        else f"asked for {asked} threads, timed at 1: this process may use a single core"
    )


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (Linux /proc/cpuinfo; empty elsewhere): detected, never assumed."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def simd_floats() -> int:
    """float32 lanes of the widest vector unit worth targeting by default: 16 with AVX-512, 8 with AVX, else 4.

    On an AMD EPYC with AVX-512, 16 lanes ran GELU 1.4x and softmax 1.3x faster than 8 with
    the same code (kernelkiln.lowering.vmath); a tuner can still try 8.
    """
    flags = cpu_flags()
    return 16 if "avx512f" in flags else 8 if {"avx", "avx2"} & flags else 4
