"""One device, many evaluations: builds and checks may overlap, timing never does.

Each agent of a run evaluates in its own GuardSession; they share one DeviceLock per
device. Building and checking hold it shared, so compiles run in parallel; timing
holds it exclusively, so a measured candidate never competes with another
evaluation's compiler or checks for the same cores, caches and memory bandwidth.
"""

from __future__ import annotations

from kernelkiln.rwlock import ReadWriteLock


class DeviceLock(ReadWriteLock):
    """Shared while building and checking, exclusive while timing (the writer, preferred once it waits)."""
