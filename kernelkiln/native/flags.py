"""Compiler flag allow-list: candidate flags may tune code generation, nothing else.

Candidate code is hostile, so every flag must match one of the patterns below. Flags
that read or write other files, load code into the compiler, or pass options through
to the assembler/linker (``-fplugin``, ``-wrapper``, ``-B``, ``-specs``, ``@file``,
``-o``, ``-I``, ``-L``, ``-include``, ``-x``, ``-save-temps``, ``-Wl,`` ...) never do.
nvcc (``lang="cuda"``) has its own, narrower list in ``cuda_flags``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .cuda_flags import nvcc_flag_problem

__all__ = ["FlagError", "check_flags", "default_flags", "split_link_flags"]


class FlagError(ValueError):
    """A compiler flag outside the allow-list; ``str()`` is one line."""


# -f<name> switches that only change optimisation or code generation.
_F_SWITCHES = frozenset(
    """
    unroll-loops unroll-all-loops peel-loops split-loops unswitch-loops
    fast-math associative-math reciprocal-math finite-math-only signed-zeros
    trapping-math math-errno rounding-math cx-limited-range
    tree-vectorize tree-loop-vectorize tree-slp-vectorize tree-loop-distribution
    tree-loop-distribute-patterns tree-loop-im tree-pre tree-partial-pre
    vect-cost-model-check version-loops-for-strides predictive-commoning
    prefetch-loop-arrays ivopts gcse gcse-las gcse-sm schedule-insns schedule-insns2
    sched-pressure modulo-sched ipa-pta ipa-cp-clone inline inline-functions
    inline-small-functions early-inlining omit-frame-pointer strict-aliasing
    strict-overflow wrapv openmp openmp-simd pic PIC plt semantic-interposition
    exceptions rtti stack-protector stack-protector-strong builtin
    align-functions align-loops align-jumps align-labels loop-interchange
    loop-unroll-and-jam loop-nest-optimize graphite-identity tracer
    move-loop-invariants reorder-blocks optimize-sibling-calls common
    opt-info-vec opt-info-vec-optimized opt-info-vec-missed opt-info-vec-all
""".split()
)

# -f<name>=<value> options with the values each may take.
_F_VALUED = {
    "vect-cost-model": re.compile(r"(unlimited|dynamic|cheap|very-cheap)"),
    "simd-cost-model": re.compile(r"(unlimited|dynamic|cheap|very-cheap)"),
    "fp-contract": re.compile(r"(fast|on|off)"),
    "excess-precision": re.compile(r"(fast|standard|16)"),
    "align-functions": re.compile(r"\d{1,4}"),
    "align-loops": re.compile(r"\d{1,4}"),
    "align-jumps": re.compile(r"\d{1,4}"),
    "align-labels": re.compile(r"\d{1,4}"),
    "visibility": re.compile(r"(default|hidden|protected|internal)"),
    "inline-limit": re.compile(r"\d{1,6}"),
}

_SIMPLE = frozenset(
    {
        "-O0",
        "-O1",
        "-O2",
        "-O3",
        "-Os",
        "-Ofast",
        "-Og",
        "-O",
        "-w",
        "-g",
        "-g0",
        "-g1",
        "-g2",
        "-g3",
        "-pthread",
        "-lm",
        "-lgomp",
    }
)

_PATTERNS = (
    re.compile(r"-m(arch|tune)=[a-z0-9][a-z0-9_.+-]{0,40}"),
    re.compile(r"-mprefer-vector-width=(none|128|256|512)"),
    re.compile(r"-mfpmath=(sse|387|both|sse\+387)"),
    re.compile(r"-m(no-)?[a-z0-9][a-z0-9-]{0,40}"),
    re.compile(r"--param=[a-z][a-z0-9-]{0,60}=\d{1,9}"),
    re.compile(r"-[DU][A-Za-z_][A-Za-z0-9_]{0,63}"),
    re.compile(r"-D[A-Za-z_][A-Za-z0-9_]{0,63}=[A-Za-z0-9_.+\-]{0,64}"),
    re.compile(r"-std=(c|gnu)(89|90|99|9x|11|1x|17|18|2x|23)"),
    re.compile(r"-std=(c|gnu)\+\+(98|03|11|0x|14|1y|17|1z|20|2a|23|2b|26|2c)"),
    # -Wl, -Wa, -Wp pass options through to other tools, so single letters are out.
    re.compile(r"-W(no-)?[a-z][a-z0-9-]{2,60}(=[a-z0-9-]{1,20})?"),
    re.compile(r"-W"),
)

_DEFAULTS = ("-O3", "-march=native", "-fPIC", "-shared")
_STD = {"c": "-std=c11", "c++": "-std=c++17"}


def check_flags(flags: Iterable[str], lang: str = "c") -> None:
    """Raise ``FlagError`` for the first flag that is not on ``lang``'s allow-list."""
    if lang == "cuda":
        problem = nvcc_flag_problem(list(flags))
        if problem is not None:
            prefix = "" if problem.startswith("compiler flag must") else "compiler flag not allowed: "
            raise FlagError(prefix + problem)
        return
    for flag in flags:
        if not isinstance(flag, str):
            raise FlagError(f"compiler flag must be a string, got {type(flag).__name__}")
        if not _allowed(flag):
            shown = flag if len(flag) <= 80 else flag[:77] + "..."
            raise FlagError(f"compiler flag not allowed: {shown!r}")


def _allowed(flag: str) -> bool:
    if flag in _SIMPLE:
        return True
    if flag.startswith("-f"):
        return _f_allowed(flag[2:])
    return any(p.fullmatch(flag) for p in _PATTERNS)


def _f_allowed(body: str) -> bool:
    name, eq, value = body.partition("=")
    if name.startswith("no-") and not eq:
        name = name[3:]
    if eq:
        pattern = _F_VALUED.get(name)
        return pattern is not None and pattern.fullmatch(value) is not None
    return name in _F_SWITCHES


def default_flags(lang: str) -> tuple[str, ...]:
    """Flags every build starts from; candidate flags come after and may override."""
    return (*_DEFAULTS, _STD[lang])


def split_link_flags(flags: Iterable[str]) -> tuple[list[str], list[str]]:
    """Split into (compile flags, ``-l`` flags); libraries must follow the source."""
    compile_flags: list[str] = []
    link_flags: list[str] = []
    for flag in flags:
        is_link = isinstance(flag, str) and flag.startswith("-l")
        (link_flags if is_link else compile_flags).append(flag)
    return compile_flags, link_flags
