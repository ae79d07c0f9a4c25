"""Platforms: where candidates run and are timed (see ``base.Platform``)."""

from __future__ import annotations

from kernelkiln.errors import UserError
from kernelkiln.platforms.base import Peaks, Platform
from kernelkiln.platforms.cpu import CpuPlatform

NAMES = ("cpu", "cuda")


def get_platform(name: str) -> Platform:
    """The platform called ``name``, ready to use; a one-line UserError when this machine lacks it."""
    if name == "cpu":
        return CpuPlatform()
    if name == "cuda":
        from kernelkiln.platforms.cuda import CudaPlatform

        platform = CudaPlatform()
    else:
        raise UserError(f"unknown platform {name!r} (known: {', '.join(NAMES)})")
    why = platform.available()
    if why is not None:
        raise UserError(f"--platform {name}: {why}")
    return platform


def machine_kind(name: str, threads: int) -> str:
    """What figures measured on this machine are comparable with: the device's identity and the timing threads.

    cpu: a digest of the CPU's model, feature flags and core count (``kiln machine``'s key); cuda: the GPU's name.
    """
    if name == "cuda":
        import torch

        return f"cuda:{torch.cuda.get_device_name(0)}"
    from kernelkiln.platforms.machine import cpu_key

    return f"cpu:{cpu_key()}:{threads}t"


__all__ = ["NAMES", "Peaks", "Platform", "get_platform", "machine_kind"]
