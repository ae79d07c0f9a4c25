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


__all__ = ["NAMES", "Peaks", "Platform", "get_platform"]
