"""The CPU platform: nothing to synchronize, wall-clock markers, cache geometry from sysfs."""

from __future__ import annotations

import time

from kernelkiln.platforms.base import Peaks
from kernelkiln.platforms.host import last_level_cache_bytes
from kernelkiln.platforms.machine import cores_text, load_peaks


class CpuPlatform:
    """Candidates run on the host's cores."""

    name = "cpu"
    device = "cpu"

    def available(self) -> str | None:
        return None

    def synchronize(self) -> None:
        """CPU work is synchronous: nothing is queued."""

    def flush_bytes(self) -> int:
        return 2 * last_level_cache_bytes()

    def marker(self) -> float:
        return time.perf_counter()

    def elapsed(self, start: float, end: float) -> float:
        return end - start

    def peaks(self, cores: int | None = None) -> Peaks:
        """The peaks `kiln machine` measured at ``cores`` threads (None: its default), never measured here."""
        record = load_peaks()
        if record is None:
            return Peaks(source="not measured on this CPU yet (run `kiln machine`)")
        if cores is None or cores == record.cores:
            return Peaks(
                bandwidth_gbs=record.bandwidth_gbs,
                gflops_fp32=record.peak_gflops,
                source=f"kiln machine, {record.measured_at[:10]}, {cores_text(record.cores)}",
            )
        at = record.per_cores.get(str(cores))
        if not at:
            return Peaks(source=f"kiln machine measured no figures for {cores_text(cores)}")
        return Peaks(
            bandwidth_gbs=at.get("bandwidth_gbs"),
            gflops_fp32=at.get("peak_gflops"),
            source=f"kiln machine, {record.measured_at[:10]}, {cores_text(cores)}",
        )

    def lock_clocks(self, mhz: int | None) -> str | None:
        return "clock locking is not supported on the CPU platform" if mhz is not None else None
