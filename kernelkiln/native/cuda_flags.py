"""nvcc flag allow-list: CUDA candidates may tune device code generation, nothing else.

Everything that names files or other programs (``-I``, ``-L``, ``-l``, ``-ccbin``,
``--compiler-bindir``, ``-o``, ``@file``, ``--options-file``, ``-include``) or passes
options through to the host compiler or linker (``-Xcompiler``, ``-Xlinker``) is
refused; the builder adds the ``-Xcompiler -fPIC`` it needs itself. Only the ``=``
spellings are accepted, except ``-Xptxas <opts>``, which may take its value as the
next flag.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["ARCH_PREFIXES", "gives_arch", "gives_opt_level", "gives_std", "nvcc_flag_problem"]

_ARCH = r"(sm|compute)_\d{2,3}[af]?"
_NUM = r"\d{1,4}"
_BOOL = r"(true|false)"

_SIMPLE = frozenset(
    {
        "-O0",
        "-O1",
        "-O2",
        "-O3",
        "--use_fast_math",
        "-use_fast_math",
        "-lineinfo",
        "--generate-line-info",
        "--expt-relaxed-constexpr",
        "-expt-relaxed-constexpr",
        "--extended-lambda",
        "-extended-lambda",
        "--expt-extended-lambda",
        "-expt-extended-lambda",
    }
)

_PATTERNS = tuple(
    re.compile(p)
    for p in (
        rf"(-arch|--gpu-architecture)={_ARCH}",
        rf"(-gencode|--generate-code)=arch=compute_\d{{2,3}}[af]?,code=({_ARCH}|\[{_ARCH}(,{_ARCH}){{0,3}}\])",
        rf"-{{1,2}}maxrregcount={_NUM}",
        rf"-{{1,2}}(ftz|prec-div|prec-sqrt|fmad)={_BOOL}",
        r"-std=c\+\+(17|20)",
        r"-[DU][A-Za-z_][A-Za-z0-9_]{0,63}",
        r"-D[A-Za-z_][A-Za-z0-9_]{0,63}=[A-Za-z0-9_.+\-]{0,64}",
    )
)

# What ``-Xptxas`` may pass on to ptxas (comma-separated in one value).
_PTXAS = re.compile(rf"(-v|--verbose|-O[0-3]|-{{1,2}}maxrregcount={_NUM})")
_XPTXAS = ("-Xptxas=", "--ptxas-options=")

# Flags that choose the target GPU; without one the builder picks the architecture.
ARCH_PREFIXES = ("-arch=", "--gpu-architecture=", "-gencode=", "--generate-code=")


def nvcc_flag_problem(flags: Sequence[object]) -> str | None:
    """The first flag that is not allowed, as shown in the error; None when all are."""
    index = 0
    while index < len(flags):
        flag = flags[index]
        if not isinstance(flag, str):
            return f"compiler flag must be a string, got {type(flag).__name__}"
        if flag in ("-Xptxas", "--ptxas-options"):
            value = flags[index + 1] if index + 1 < len(flags) else None
            if not isinstance(value, str) or not _ptxas_ok(value):
                return repr(f"{flag} {value}" if isinstance(value, str) else flag)
            index += 2
            continue
        if not _allowed(flag):
            return repr(flag if len(flag) <= 80 else flag[:77] + "...")
        index += 1
    return None


def _allowed(flag: str) -> bool:
    if flag in _SIMPLE:
        return True
    for prefix in _XPTXAS:
        if flag.startswith(prefix):
            return _ptxas_ok(flag[len(prefix) :])
    return any(p.fullmatch(flag) for p in _PATTERNS)


def _ptxas_ok(value: str) -> bool:
    parts = value.split(",")
    return 0 < len(parts) <= 8 and all(_PTXAS.fullmatch(p) for p in parts)


def gives_arch(flags: Sequence[str]) -> bool:
    """Whether the candidate chose the target GPU architecture itself."""
    return any(isinstance(f, str) and f.startswith(ARCH_PREFIXES) for f in flags)


def gives_opt_level(flags: Sequence[str]) -> bool:
    return any(f in ("-O0", "-O1", "-O2", "-O3") for f in flags)


def gives_std(flags: Sequence[str]) -> bool:
    return any(isinstance(f, str) and f.startswith("-std=") for f in flags)
