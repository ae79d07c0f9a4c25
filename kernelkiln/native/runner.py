"""Run the compiler confined: own session, scrubbed environment, and a wall-clock timeout
that kills the whole process group, under the isolation layers of
``kernelkiln.isolation`` (namespaces, home directories hidden, Landlock, seccomp,
resource limits, another uid/gid when root asks for one).

No ``preexec_fn`` is used (unsafe in a threaded parent): a small launcher process
(``kernelkiln.isolation.launch``) applies the layers to itself and then execs the compiler.
"""

from __future__ import annotations

import os
import pwd
import select
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kernelkiln.isolation import launch, paths
from kernelkiln.isolation.layers import Confinement, Report

__all__ = [
    "CUDA_LIMITS",
    "DEFAULT_LIMITS",
    "RunOutcome",
    "compiler_confinement",
    "compiler_env",
    "resolve_group",
    "run_confined",
]

# prlimit long options -> value. Sized for gcc on one translation unit.
DEFAULT_LIMITS: dict[str, int] = {
    "as": 4 << 30,  # address space, bytes
    "cpu": 60,  # CPU seconds
    "fsize": 256 << 20,  # largest file it may write, bytes
    "nproc": 64,  # processes of the (real) uid
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
    """What the confined process did. ``returncode`` is None on timeout; ``isolation`` is
    the launcher's report (None: it never reported)."""

    returncode: int | None
    output: str
    timed_out: bool
    isolation: Report | None = None

    @property
    def refused(self) -> bool:
        """The launcher refused to run the command: a required layer did not hold."""
        return self.returncode == launch.REFUSED


def compiler_confinement(
    compiler_path: str, workdir: str, *, network: bool = True, filesystem: bool = True
) -> Confinement:
    """The compiler reads the system and its own installation, writes only ``workdir``."""
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(compiler_path)))
    return Confinement(
        workspace=workdir,
        read=sorted({*paths.SYSTEM, prefix}),
        devices=paths.devices(gpu=False),
        hide=paths.homes(),
        pids=False,
        network=network,
        filesystem=filesystem,
    )


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


def merge_limits(limits: Mapping[str, int | None] | None, base: Mapping[str, int] = DEFAULT_LIMITS) -> dict[str, int]:
    """``base`` overridden by ``limits``; a ``None`` value removes that limit."""
    merged: dict[str, int | None] = dict(base)
    for name, value in (limits or {}).items():
        if not name.isalpha():
            raise ValueError(f"bad resource limit name {name!r}")
        merged[name] = value
    return {k: int(v) for k, v in merged.items() if v is not None}


def run_confined(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    user: int | None,
    group: int | None,
    timeout: float,
    limits: Mapping[str, int | None] | None,
    base_limits: Mapping[str, int] = DEFAULT_LIMITS,
    confinement: Confinement | None = None,
    required: Sequence[str] = (),
) -> RunOutcome:
    """Run ``argv`` confined and return its combined stdout/stderr (truncated).

    ``limits`` override ``base_limits`` (``DEFAULT_LIMITS`` unless given); ``confinement``
    defaults to a compiler's, with ``argv[0]`` as the compiler; ``required`` layers must
    hold, or the command is not run (``RunOutcome.refused``).
    """
    conf = (confinement or compiler_confinement(argv[0], cwd)).replace(uid=user, gid=group)
    command = launch.argv(conf, list(argv), limits=merge_limits(limits, base_limits), required=list(required))
    # An unlinked file owned by the parent: no pipe deadlock, nothing the child can swap.
    with tempfile.TemporaryFile() as sink:
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
        try:
            timed_out = not _wait(proc, timeout)
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
    report, output = launch.parse(output)
    return RunOutcome(None if timed_out else proc.returncode, output, timed_out, report)


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait for ``proc`` to exit (True) or ``timeout`` to pass (False). Popen.wait(timeout)
    polls with sleeps that double up to 50 ms, which made every build end up to 50 ms late."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (Linux < 5.3): Popen's polling
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        exited = bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)
    if exited:
        proc.wait()
    return exited


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
