"""Isolation of a worker process, applied in the child before any candidate code runs.

Layers (each reported, each applied where the OS allows it): own session, parent-death
signal, resource limits, empty network namespace, private temp directories, an
unprivileged user id of its own (when the guard runs as root), a scrubbed environment.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

# Environment variables a worker may inherit; everything else (API keys included) is dropped.
ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH", "PYTHONHASHSEED",
             "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
             "OPENBLAS_L2_SIZE", "CUDA_VISIBLE_DEVICES", "KILN_CACHE_DIR")

# Set by the guard per platform, never inherited: without a GPU, Triton kernels run under
# Triton's interpreter (numpy on the host), checkable but not timeable.
_PLATFORM_ENV = {"cpu": {"TRITON_INTERPRET": "1"}}

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_MS_RDONLY, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x1, 0x20, 0x1000, 0x4000, 0x40000
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS = 1, 38
_UID_BASE, _UID_SPAN = 200_000, 1 << 28
SLOTS_PER_PROCESS = 64


@dataclass
class SandboxSpec:
    """What the child applies to itself; built by the parent, sent to the child."""

    workspace: str
    uid: int | None
    memory_limit_mb: int
    file_size_limit_mb: int
    max_tasks: int
    isolate_network: bool
    isolate_filesystem: bool
    env: dict[str, str] = field(default_factory=dict)
    readable: list[str] = field(default_factory=list)  # paths the worker must still read (the task file)
    # False on a GPU: its driver reserves far more address space than it uses, so RLIMIT_AS
    # would stop it from starting; the data segment (private writable memory) is limited instead.
    limit_address_space: bool = True
    cpus: list[int] | None = None  # cores the worker runs on (None: wherever the guard may)


def platform_env(platform: str) -> dict[str, str]:
    """Variables the workers (and the fork-server they come from) get on ``platform``."""
    return dict(_PLATFORM_ENV.get(platform, {}))


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a worker gets: an allow-list of harmless variables."""
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    # Outputs up to 32 MiB come from malloc's heap and are reused, instead of fresh mmap'd
    # pages faulted in on every call: page faults on a virtual machine cost milliseconds
    # and vary tenfold, drowning the kernel's own time. Reference and candidates alike.
    env["MALLOC_MMAP_THRESHOLD_"] = str(32 << 20)
    env["MALLOC_TRIM_THRESHOLD_"] = str(1 << 30)
    env.update(extra or {})
    return env


def can_switch_user() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def allocate_uid(slot: int) -> int:
    """A user id private to this guard process and worker slot (no passwd entry needed)."""
    if not 0 <= slot < SLOTS_PER_PROCESS:
        raise ValueError(f"worker slot {slot} out of range")
    return _UID_BASE + ((os.getpid() * SLOTS_PER_PROCESS + slot) % _UID_SPAN)


def make_workspace(uid: int | None) -> Path:
    """A fresh 0700 directory owned by the worker's user."""
    path = Path(tempfile.mkdtemp(prefix="kiln-ws-"))
    if uid is not None:
        os.chown(path, uid, uid)
    return path


def remove_workspace(path: str | Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def enter(spec: SandboxSpec) -> dict[str, bool]:
    """Apply every isolation layer to the calling (child) process; return which held."""
    applied: dict[str, bool] = {}
    if spec.cpus:  # first, so every thread the worker starts inherits the mask
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, spec.cpus)
    libc = _libc()
    with contextlib.suppress(OSError):
        os.setsid()
    applied["session"] = os.getsid(0) == os.getpid()
    if libc is not None:
        applied["parent_death_signal"] = libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    applied["network"] = bool(spec.isolate_network and libc is not None and libc.unshare(_CLONE_NEWNET) == 0)
    applied["filesystem"] = bool(spec.isolate_filesystem and libc is not None and _private_tmp(
        libc, spec.workspace, _needed_under_masked(spec.readable)))
    workspace = "/tmp" if applied["filesystem"] else spec.workspace  # the workspace now sits on /tmp
    mb = 1 << 20
    limits = {
        resource.RLIMIT_AS if spec.limit_address_space else resource.RLIMIT_DATA: spec.memory_limit_mb * mb,
        resource.RLIMIT_FSIZE: spec.file_size_limit_mb * mb,
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_NOFILE: 256,
    }
    if spec.uid is not None:
        limits[resource.RLIMIT_NPROC] = spec.max_tasks  # counts per user id; useless for root
    elif os.geteuid() != 0:  # sharing the user's id: allow what the user already runs, plus the budget
        limits[resource.RLIMIT_NPROC] = _tasks_of_user(os.getuid()) + spec.max_tasks
    for which, value in limits.items():
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, value))
    applied["resource_limits"] = True
    applied["user"] = False
    if spec.uid is not None:
        os.setgroups([])
        os.setgid(spec.uid)
        os.setuid(spec.uid)
        applied["user"] = os.getuid() == spec.uid
    if libc is not None:
        libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    os.chdir(workspace)
    os.environ.clear()
    os.environ.update({**spec.env, "HOME": workspace, "TMPDIR": workspace, "TRITON_HOME": workspace,
                       "TRITON_CACHE_DIR": os.path.join(workspace, ".triton", "cache")})
    tempfile.tempdir = workspace
    _redirect_stdio(workspace)
    applied["environment"] = True
    return applied


_MASKED = ("/var/tmp", "/dev/shm", "/tmp")


def _needed_under_masked(extra: list[str]) -> list[str]:
    """Top-level folders under a masked directory that the worker still needs to read:
    the Python installation, kernelkiln itself, the task (a checkout or venv in /tmp)."""
    needed = set()
    for path in [*sys.path, sys.prefix, *extra]:
        real = os.path.realpath(path) if path else ""
        for top in _MASKED:
            if real.startswith(top + "/") and os.path.exists(real):
                needed.add(os.path.join(top, real[len(top) + 1:].split("/")[0]))
    return sorted(needed)


def _private_tmp(libc: ctypes.CDLL, workspace: str, keep: list[str]) -> bool:
    """Replace /tmp, /var/tmp and /dev/shm by the workspace; what the worker needs there
    comes back read-only (bound through file descriptors opened before the masking)."""
    if libc.unshare(_CLONE_NEWNS) != 0:
        return False
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return False
    fds = {path: os.open(path, os.O_PATH) for path in [workspace, *keep]}
    ok = True
    for target in _MASKED:
        if os.path.isdir(target):
            ok &= libc.mount(f"/proc/self/fd/{fds[workspace]}".encode(), target.encode(), None, _MS_BIND, None) == 0
    for path in keep:
        if os.path.isdir(f"/proc/self/fd/{fds[path]}"):
            os.makedirs(path, exist_ok=True)
        else:
            open(path, "a").close()
        ok &= libc.mount(f"/proc/self/fd/{fds[path]}".encode(), path.encode(), None, _MS_BIND | _MS_REC, None) == 0
        ok &= libc.mount(None, path.encode(), None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_REC, None) == 0
    for fd in fds.values():
        os.close(fd)
    return ok


def _redirect_stdio(workspace: str) -> None:
    # Nothing a candidate prints is read by the guard; it goes to a capped log file.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    log = os.open(os.path.join(workspace, "worker.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)


def pids_of_user(uid: int) -> list[int]:
    """Processes owned by ``uid`` (Linux /proc)."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if os.stat(entry.path).st_uid == uid:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def pids_of_session(sid: int) -> list[int]:
    """Processes in session ``sid`` (Linux /proc): a worker and whatever it started without leaving it."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"{entry.path}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if len(fields) > 3 and int(fields[3]) == sid:
                pids.append(int(entry.name))
    return pids


def kill_user(uid: int) -> None:
    """Kill every process of a sandbox user id, fork bombs included."""
    # kill(-1) as that user signals all of its processes in one kernel pass; new forks cannot slip by.
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(["kill", "-KILL", "-1"], user=uid, group=uid, extra_groups=[],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, check=False)
    for _ in range(50):
        pids = pids_of_user(uid)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _tasks_of_user(uid: int) -> int:
    """Processes plus threads of ``uid``: what RLIMIT_NPROC counts."""
    total = 0
    for pid in pids_of_user(uid):
        try:
            total += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return total
