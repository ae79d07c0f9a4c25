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


def default_threads() -> int:
    """All cores but one: the guard's parent needs a core of its own to time fairly."""
    return max(1, (os.cpu_count() or 1) - 1)
