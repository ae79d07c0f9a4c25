"""How a torch C++ extension (``load_inline``'s form) is compiled: torch's own command line, confined.

A ``BuildRequest`` with a ``module`` name is a C++ source that includes ``<torch/extension.h>``
and defines ``PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)``; it is built into a Python extension
module against the running torch's headers and libraries, with the flags torch's own
``load_inline`` would use (no optimisation level of its own: a candidate asks for ``-O3`` in
``extra_cflags`` as it would under torch). The include and library paths come from torch, never
from the candidate; the confined compiler may read only them besides the system and itself.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig

from .flags import split_link_flags
from .records import BuildRequest
from .toolchain import Compiler

__all__ = ["EXTENSION_LIMITS", "extension_argv", "extension_identity", "extension_paths", "extension_problem"]

# cc1plus on <torch/extension.h> alone takes ~35 s of CPU and ~1 GiB here.
EXTENSION_LIMITS: dict[str, int] = {
    "as": 8 << 30,
    "cpu": 600,
    "fsize": 1 << 30,
    "nproc": 64,
}
EXTENSION_TIMEOUT_S = 300.0
_LIBRARIES = ("-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python")


@functools.cache
def _torch_paths() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """torch's include and library directories, as ``torch.utils.cpp_extension`` gives them."""
    from torch.utils import cpp_extension  # trusted side only: it imports setuptools pieces

    return tuple(cpp_extension.include_paths()), tuple(cpp_extension.library_paths())


def _python_include() -> str:
    return sysconfig.get_paths()["include"]


@functools.cache
def _std() -> str:
    """The C++ standard torch builds extensions with (C++20 from torch 2.10 on, C++17 before)."""
    import torch

    major, minor = (int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    return "-std=c++20" if (major, minor) >= (2, 10) else "-std=c++17"


def extension_problem() -> str | None:
    """Why torch extensions cannot be built on this machine (missing headers), or None."""
    includes, _ = _torch_paths()
    if not any(os.path.isfile(os.path.join(p, "torch", "extension.h")) for p in includes):
        return "this torch installation has no C++ headers (torch/extension.h)"
    if not os.path.isfile(os.path.join(_python_include(), "Python.h")):
        return f"Python's C headers are not installed ({_python_include()}/Python.h; on Debian: python3-dev)"
    return None


def extension_paths() -> list[str]:
    """What the confined compiler must read besides the system: torch's and Python's headers, torch's libraries."""
    includes, libraries = _torch_paths()
    return sorted({os.path.realpath(p) for p in (*includes, *libraries, _python_include()) if os.path.isdir(p)})


def extension_argv(request: BuildRequest, compiler: Compiler, output: str) -> list[str]:
    """The g++ command line for a torch extension named ``request.module`` (flags are not checked here)."""
    includes, libraries = _torch_paths()
    compile_flags, link_flags = split_link_flags(request.flags)
    argv = [
        compiler.path,
        f"-DTORCH_EXTENSION_NAME={request.module}",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
    ]
    for path in (*includes, _python_include()):
        argv += ["-isystem", path]
    argv += ["-fPIC", _std(), *compile_flags]
    if compiler.json_diagnostics:
        argv.append("-fdiagnostics-format=json")
    argv += [request.filename, "-shared", *(f"-L{p}" for p in libraries), *_LIBRARIES, *link_flags, "-o", output]
    return argv


@functools.cache
def extension_identity() -> dict[str, str]:
    """What besides the command line changes a built extension: torch's build, its C++ ABI, and Python's."""
    import torch

    return {
        "torch": torch.__version__,
        "torch_git": str(getattr(torch.version, "git_version", "")),
        "cxx11_abi": str(bool(torch._C._GLIBCXX_USE_CXX11_ABI)),
        "python": sysconfig.get_config_var("SOABI") or sys.version,
    }
