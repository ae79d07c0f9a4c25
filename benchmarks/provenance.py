"""What produced a figure file: the command, the machine and the commit, for the results pages to cite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kernelkiln.platforms.host import cpu_flags, usable_cores
from kernelkiln.platforms.machine import cpu_name

OUTPUTS = ("benchmarks/figures", "benchmarks/data")


def provenance() -> dict[str, str]:
    """``{"command", "machine", "commit"}`` of this run (the commit marked ``+changes`` when the tree differs)."""
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
        # what the benchmarks write is not a change to what they measure: a sweep that ran after another
        # wrote its figures is at the same commit
        status = ["git", "status", "--porcelain", "--", ".", *(f":(exclude){p}" for p in OUTPUTS)]
        dirty = subprocess.run(status, cwd=root, capture_output=True, text=True)
        sha = commit.stdout.strip() + ("+changes" if dirty.stdout.strip() else "") if commit.returncode == 0 else ""
    except OSError:
        sha = ""
    simd = "AVX-512" if "avx512f" in cpu_flags() else "AVX2" if "avx2" in cpu_flags() else "no AVX2"
    script = Path(sys.argv[0]).resolve()
    shown = script.relative_to(root) if script.is_relative_to(root) else script
    return {
        "command": " ".join(["python", str(shown), *sys.argv[1:]]),
        "machine": f"{usable_cores()} cores of {cpu_name()} ({simd})",
        "commit": sha or "unknown",
    }
