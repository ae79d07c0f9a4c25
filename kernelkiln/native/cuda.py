"""How CUDA sources are compiled: the nvcc command line and the target GPU architecture.

A CUDA source holds ``__global__`` kernels and ``extern "C"`` host launchers taking
device pointers; nvcc builds it into a shared library with the CUDA runtime linked
statically (the library loads without libcudart on the loader path). When the
candidate names no architecture, the builder passes one explicitly, so the command
line (and therefore the cache key) always says which GPU the binary is for:
``KILN_CUDA_ARCH`` if set (``"sm_90"``, ``"90"``, ``"9.0"``, comma-separated for
several), else every GPU ``nvidia-smi`` lists, else nvcc's own default.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile

from .cuda_flags import gives_arch, gives_opt_level, gives_std
from .records import BuildRequest
from .runner import compiler_env
from .toolchain import Compiler

__all__ = ["arch_flags", "gpu_archs", "host_compiler", "nvcc_argv", "nvcc_default_arch"]

_BASE = ("--shared", "-Xcompiler", "-fPIC", "--cudart=static")
_CAPABILITY = re.compile(r"^\s*(?:sm_)?(\d+)(?:\.(\d+))?([af]?)\s*$")


def nvcc_argv(request: BuildRequest, compiler: Compiler, output: str) -> list[str]:
    """The nvcc command line; candidate flags replace the default -O3, -std and arch."""
    flags = list(request.flags)
    argv = [compiler.path, *_BASE]
    if not gives_opt_level(flags):
        argv.append("-O3")
    if not gives_std(flags):
        argv.append("-std=c++17")
    if not gives_arch(flags):
        argv.extend(arch_flags(compiler.path))
    return [*argv, *flags, request.filename, "-o", output]


def arch_flags(nvcc: str) -> list[str]:
    """Explicit architecture flags for builds whose candidate named none."""
    archs = gpu_archs(os.environ.get("KILN_CUDA_ARCH", ""))
    if not archs:
        default = nvcc_default_arch(nvcc)
        return [f"-arch={default}"] if default else []
    if len(archs) == 1:
        return [f"-arch={archs[0]}"]
    return [f"-gencode=arch=compute_{a[3:]},code={a}" for a in archs]


@functools.cache
def gpu_archs(override: str = "") -> tuple[str, ...]:
    """``sm_NN`` of the GPUs to build for: ``override`` if given, else ``nvidia-smi``'s.

    Runs ``nvidia-smi`` rather than asking torch, so the trusted parent never
    initialises CUDA itself (that would break later forks and cost device memory).
    """
    if override:
        text = override.replace(",", "\n")
    else:
        text = _run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"])
    archs = []
    for line in text.splitlines():
        match = _CAPABILITY.match(line)
        if match is None:
            continue
        major, minor, suffix = match[1], match[2], match[3]
        number = f"{major}{minor}" if minor is not None else major
        arch = f"sm_{number}{suffix}"
        if arch not in archs:
            archs.append(arch)
    return tuple(sorted(archs))


@functools.cache
def nvcc_default_arch(nvcc: str) -> str | None:
    """The ``sm_NN`` nvcc targets when given no ``-arch`` (from ``--dryrun``), or None."""
    with tempfile.TemporaryDirectory(prefix="kiln-nvcc-") as where:
        text = _run([nvcc, "--dryrun", "--shared", "probe.cu", "-o", "probe.so"], cwd=where)
    match = re.search(r"-arch[= ](sm_\d+[af]?)\b", text)
    return match[1] if match else None


@functools.cache
def host_compiler(nvcc: str) -> tuple[str, str]:
    """Path and ``--version`` of the ``gcc`` nvcc will find on the build's PATH."""
    found = shutil.which("gcc", path=compiler_env(nvcc, "")["PATH"])
    if found is None:
        return ("<no host compiler>", "")
    path = os.path.realpath(found)
    return (path, _run([path, "--version"]).strip())


def _run(argv: list[str], cwd: str | None = None) -> str:
    try:
        done = subprocess.run(
            argv,
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
            cwd=cwd,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C"},
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{done.stdout}\n{done.stderr}" if done.returncode == 0 else ""
