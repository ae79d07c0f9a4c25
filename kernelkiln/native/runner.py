"""Run the compiler confined: own session, scrubbed environment, resource limits,
optional other uid/gid, and a wall-clock timeout that kills the whole process group.

No ``preexec_fn`` is used (unsafe in a threaded parent): identity is switched with
``subprocess``'s ``user``/``group``/``extra_groups`` and limits are set by the
``prlimit`` binary, which then execs the compiler (where prlimit is not installed the
compiler runs without resource limits; the timeout still applies).
"""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .toolchain import find_prlimit

__all__ = [
    "CUDA_LIMITS",
    "DEFAULT_LIMITS",
    "RunOutcome",
    "compiler_env",
    "resolve_group",
    "run_confined",
]

# prlimit long options -> value. Sized for gcc on one translation unit.
DEFAULT_LIMITS: dict[str, int] = {
    "as": 4 << 30,       # address space, bytes
    "cpu": 60,           # CPU seconds
    "fsize": 256 << 20,  # largest file it may write, bytes
    "nproc": 64,         # processes of the (real) uid
}

# nvcc runs cudafe++, cicc, ptxas, fatbinary, nvlink and gcc in turn; cicc alone took
# ~0.6 GiB and 15 s of CPU for a kernel including <cub/cub.cuh>, and template-heavy
# headers (CUTLASS/CuTe) take many times that.
CUDA_LIMITS: dict[str, int] = {
    "as": 16 << 30,
    "cpu": 600,
    "fsize": 1 << 30,
    "nproc": 64,
}

_SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
# Output beyond this is dropped; diagnostics past it are lost, not misparsed.
_MAX_OUTPUT = 8 << 20


@dataclass(frozen=True)
class RunOutcome:
    """What the confined process did. ``returncode`` is None on timeout."""

    returncode: int | None
    output: str
    timed_out: bool


def compiler_env(compiler_path: str, workdir: str) -> dict[str, str]:
    """The complete environment the compiler sees: nothing inherited but PATH shape.

    Secrets (API keys, tokens) in the parent's environment never reach it. TMPDIR
    keeps the compiler's intermediate files inside the private build directory.
    """
    path = _SAFE_PATH
    tool_dir = os.path.dirname(compiler_path)
    if tool_dir and tool_dir not in path.split(":"):
        path = f"{tool_dir}:{path}"
    return {"PATH": path, "LANG": "C", "TMPDIR": workdir}


def resolve_group(user: int | None, group: int | None) -> int | None:
    """The gid to run as: ``group``, else the primary group of ``user``.

    Without this a process switched only to another uid would keep the parent's gid.
    """
    if group is not None or user is None:
        return group
    try:
        return pwd.getpwuid(user).pw_gid
    except KeyError:
        return user


def merge_limits(limits: Mapping[str, int | None] | None,
                 base: Mapping[str, int] = DEFAULT_LIMITS) -> dict[str, int]:
    """``base`` overridden by ``limits``; a ``None`` value removes that limit."""
    merged: dict[str, int | None] = dict(base)
    for name, value in (limits or {}).items():
        if not name.isalpha():
            raise ValueError(f"bad resource limit name {name!r}")
        merged[name] = value
    return {k: int(v) for k, v in merged.items() if v is not None}


def run_confined(argv: Sequence[str], *, cwd: str, env: Mapping[str, str],
                 user: int | None, group: int | None, timeout: float,
                 limits: Mapping[str, int | None] | None,
                 base_limits: Mapping[str, int] = DEFAULT_LIMITS) -> RunOutcome:
    """Run ``argv`` confined and return its combined stdout/stderr (truncated).

    ``limits`` override ``base_limits`` (``DEFAULT_LIMITS`` unless given).
    """
    command = list(argv)
    prlimit = find_prlimit()
    if prlimit is not None:
        merged = merge_limits(limits, base_limits)
        settings = [f"--{name}={value}" for name, value in merged.items()]
        command = [prlimit, *settings, "--", *command]
    identity: dict[str, object] = {}
    if user is not None or group is not None:
        identity = {"user": user, "group": group, "extra_groups": []}
    # An unlinked file owned by the parent: no pipe deadlock, nothing the child can swap.
    with tempfile.TemporaryFile() as sink:
        proc = subprocess.Popen(command, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, **identity)
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        except BaseException:
            _kill_group(proc.pid)
            proc.wait()
            raise
        if timed_out:
            # The leader is not reaped yet, so its pid still names this group.
            _kill_group(proc.pid)
            proc.wait()
        sink.seek(0)
        output = sink.read(_MAX_OUTPUT).decode("utf-8", errors="replace")
    return RunOutcome(None if timed_out else proc.returncode, output, timed_out)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
