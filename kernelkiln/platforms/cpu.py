"""The CPU platform: nothing to synchronize, wall-clock markers, cache geometry from sysfs, measured peaks."""

from __future__ import annotations

import time

from kernelkiln.platforms.base import Peaks
from kernelkiln.platforms.host import last_level_cache_bytes
from kernelkiln.platforms.machine import cores_text, first_use


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
        """The peaks `kiln machine` measured at ``cores`` threads (None: its default), measured on first use.

        For a core count it did not measure, the figures of the nearest count above it: an
        upper bound, so a speed-of-light bound from them never flags an honest time.
        """
        record, why = first_use()
        if record is None:
            return Peaks(source=f"not measured on this CPU ({why or 'run `kiln machine`'})")
        when = record.measured_at[:10]
        if cores is None or cores == record.cores:
            return Peaks(
                bandwidth_gbs=record.bandwidth_gbs,
                gflops_fp32=record.peak_gflops,
                source=f"kiln machine, {when}, {cores_text(record.cores)}",
            )
        counts = sorted(int(c) for c in record.per_cores if c.isdigit())
        above = [c for c in counts if c >= cores]
        if not above:
            return Peaks(source=f"kiln machine measured no figures for {cores_text(cores)} or more")
        at = record.per_cores[str(above[0])]
        where = cores_text(cores) if above[0] == cores else f"{cores_text(above[0])}, the nearest above {cores}"
        return Peaks(
            bandwidth_gbs=at.get("bandwidth_gbs"),
            gflops_fp32=at.get("peak_gflops"),
            source=f"kiln machine, {when}, {where}",
        )

    def lock_clocks(self, mhz: int | None) -> str | None:
        return "clock locking is not supported on the CPU platform" if mhz is not None else None
