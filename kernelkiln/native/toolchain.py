"""Which compiler builds a kernel and which machine it targets, probed once per process.

Both feed the cache key: a binary built by another compiler version, or with
``-march=native`` on another CPU, must never be reused. CUDA sources use ``nvcc``
(``KILN_NVCC``, else ``PATH``, else the toolkit's usual install directory).
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass

__all__ = ["Compiler", "CompilerNotFound", "cpu_identity", "find_compiler"]

# Candidates per language; KILN_CC / KILN_CXX / KILN_NVCC name an explicit compiler instead.
_CANDIDATES = {"c": ("gcc", "cc"), "c++": ("g++", "c++"), "cuda": ("nvcc", "/usr/local/cuda/bin/nvcc")}
_ENV = {"c": "KILN_CC", "c++": "KILN_CXX", "cuda": "KILN_NVCC"}


class CompilerNotFound(RuntimeError):
    """No usable compiler for the language on this machine."""


@dataclass(frozen=True)
class Compiler:
    """A resolved compiler: its real path and the text of ``--version``."""

    path: str
    version: str

    @property
    def is_nvcc(self) -> bool:
        return "cuda compiler driver" in self.version.lower()

    @property
    def json_diagnostics(self) -> bool:
        # clang and nvcc have no -fdiagnostics-format=json; their text output is parsed.
        return "clang" not in self.version.lower() and not self.is_nvcc


def find_compiler(lang: str) -> Compiler:
    """The compiler for ``lang`` ("c", "c++" or "cuda"); raises ``CompilerNotFound``."""
    return _probe(lang, os.environ.get(_ENV[lang], ""))


@functools.cache
def _probe(lang: str, override: str) -> Compiler:
    names = (override,) if override else _CANDIDATES[lang]
    for name in names:
        found = shutil.which(name)
        if found is None:
            continue
        path = os.path.realpath(found)
        try:
            done = subprocess.run(
                [path, "--version"],
                check=False,
                capture_output=True,
                text=True,
                timeout=30,
                env={"PATH": os.defpath, "LANG": "C"},
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            return Compiler(path=path, version=done.stdout.strip())
    hint = " (install the CUDA toolkit or set KILN_NVCC)" if lang == "cuda" else ""
    raise CompilerNotFound(f"no {lang} compiler found (tried {', '.join(names)}){hint}")


@functools.cache
def cpu_identity() -> str:
    """CPU model name and feature flags (Linux), else the machine architecture."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return f"{platform.machine()}|{platform.processor()}"
    wanted = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        # x86 names these "model name"/"flags"; arm64 "CPU part"/"Features".
        if sep and key in ("model name", "flags", "Features", "CPU implementer", "CPU part") and key not in wanted:
            wanted[key] = value.strip()
    if not wanted:
        return f"{platform.machine()}|{platform.processor()}"
    return platform.machine() + "|" + "|".join(f"{k}={v}" for k, v in sorted(wanted.items()))
