"""What a platform is: where candidates run and how they are synchronized, flushed, timed and bounded.

One file per platform (cpu.py, cuda.py); a new accelerator (XPU, an Ascend NPU through
torch_npu) is one more small file written against ``torch.accelerator`` and
``torch.Event``, registered in ``kernelkiln.platforms``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Peaks:
    """A device's peak rates, for speed-of-light bounds (None: not known on this platform)."""

    bandwidth_gbs: float | None = None
    gflops_fp32: float | None = None
    source: str = ""  # where the figures come from


class Platform(Protocol):
    """How candidates run on one kind of device."""

    name: str
    device: str  # the torch device string tensors are placed on

    def available(self) -> str | None:
        """None when this machine can run on the platform, else why not (one line)."""

    def synchronize(self) -> None:
        """Wait until all work queued on the device (on every stream) has finished."""

    def flush_bytes(self) -> int:
        """Bytes of distinct data that push a kernel's inputs out of the caches (2x the last level)."""

    # Any: a marker is opaque, and each platform takes back only what its own marker() returned.
    def elapsed(self, start: Any, end: Any) -> float:
        """Seconds between two markers taken by ``marker()``, after synchronizing."""

    def marker(self) -> Any:
        """A point in the device's timeline (a clock reading on CPU, a recorded event on a GPU)."""

    def peaks(self, cores: int | None = None) -> Peaks:
        """The device's peak bandwidth and FLOP/s, as far as this platform can tell (at ``cores`` threads on CPU)."""

    def lock_clocks(self, mhz: int | None) -> str | None:
        """Lock the device's clocks (None: release them); None on success, else why it failed."""
