"""Lanes of worker slots: each open GuardSession of a process holds one, so no two sessions share a sandbox uid."""

from __future__ import annotations

import threading

from kernelkiln.errors import UserError
from kernelkiln.guard.worker import sandbox

SLOTS_PER_SESSION = 4  # reference, candidate, incumbent, build
LANES = sandbox.SLOTS_PER_PROCESS // SLOTS_PER_SESSION

_lock = threading.Lock()
_free = list(range(LANES))


def take() -> int:
    """A lane of worker slots (so of sandbox uids) no other open session of this process holds."""
    with _lock:
        if not _free:
            raise UserError(f"at most {LANES} guard sessions can be open at once in one process")
        return _free.pop(0)


def give(lane: int) -> None:
    """Return ``lane`` for another session to take."""
    with _lock:
        _free.append(lane)
        _free.sort()
