"""The CUDA platform: device-wide synchronization, event markers, 2x-L2 flushes, clock locking.

Written against ``torch.accelerator`` and ``torch.Event`` where torch offers them, so a
sibling for XPU or an NPU differs only in its name, its availability check and where it
reads L2 size and peaks from.
"""

from __future__ import annotations

import shutil
import subprocess

import torch

from kernelkiln.platforms.base import Peaks

_DEFAULT_L2 = 50 << 20  # bytes; used only when the device does not report its L2 size


class CudaPlatform:
    """Candidates run on an NVIDIA GPU (device 0 of the visible ones)."""

    name = "cuda"
    device = "cuda"

    def available(self) -> str | None:
        if not torch.cuda.is_available():
            build = "a CPU-only torch build" if torch.version.cuda is None else f"CUDA {torch.version.cuda} torch"
            return f"no CUDA device is visible ({build}; torch.cuda.is_available() is False)"
        return None

    def synchronize(self) -> None:
        # Device-wide, not stream-wide: work a candidate queued on a side stream is waited for too.
        torch.accelerator.synchronize()

    def flush_bytes(self) -> int:
        props = torch.cuda.get_device_properties(torch.accelerator.current_device_index())
        return 2 * int(getattr(props, "L2_cache_size", 0) or _DEFAULT_L2)

    def marker(self) -> torch.Event:
        event = torch.Event(device=self.device, enable_timing=True)
        event.record()
        return event

    def elapsed(self, start: torch.Event, end: torch.Event) -> float:
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def peaks(self, cores: int | None = None) -> Peaks:  # cores: a CPU notion, unused here
        props = torch.cuda.get_device_properties(torch.accelerator.current_device_index())
        clock_khz, bus_bits = getattr(props, "memory_clock_rate", 0), getattr(props, "memory_bus_width", 0)
        bandwidth = 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9 if clock_khz and bus_bits else None
        # FP32 FLOP/s needs cores per SM and the boost clock, which torch does not report.
        return Peaks(bandwidth_gbs=bandwidth, source=f"device properties of {props.name}")

    def lock_clocks(self, mhz: int | None) -> str | None:
        smi = shutil.which("nvidia-smi")
        if smi is None:
            return "nvidia-smi is not on PATH"
        index = str(torch.accelerator.current_device_index())
        argv = [smi, "-i", index, "-rgc"] if mhz is None else [smi, "-i", index, "-lgc", f"{mhz},{mhz}"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        if done.returncode != 0:
            return (
                (done.stderr or done.stdout).strip().splitlines()[0]
                if (done.stderr or done.stdout).strip()
                else f"nvidia-smi exited with {done.returncode}"
            )
        return None
