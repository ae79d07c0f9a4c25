"""The CPU platform: cache geometry for cold-cache timing."""

from __future__ import annotations

import functools
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
