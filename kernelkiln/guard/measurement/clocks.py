"""Locked clocks, shared by the sessions that asked for them: the last one to close releases them."""

from __future__ import annotations

import threading

from kernelkiln.errors import UserError
from kernelkiln.platforms.base import Platform

_lock = threading.Lock()
_holders = 0  # open sessions holding locked clocks


def lock(platform: Platform, mhz: int) -> None:
    """Lock the device's clocks at ``mhz`` (a one-line UserError when the platform cannot)."""
    global _holders
    with _lock:
        why = platform.lock_clocks(mhz)
        if why is not None:
            raise UserError(f"clock locking at {mhz} MHz was asked for and failed: {why}")
        _holders += 1


def release(platform: Platform) -> None:
    """One holder fewer; the clocks unlock when none is left."""
    global _holders
    with _lock:
        _holders -= 1
        if _holders == 0:
            platform.lock_clocks(None)
