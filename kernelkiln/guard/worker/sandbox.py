"""Isolation of a worker process, applied in the child before any candidate code runs.

Layers (each reported, each applied where the OS allows it; kernelkiln.isolation has the
kernel's part): own session, parent-death signal, an unprivileged user namespace holding
a network namespace with nothing in it, a mount namespace (private /tmp, /var/tmp and
/dev/shm, home directories hidden) and a PID namespace whose first process is the worker
(whatever it starts dies with it), resource limits, a user id of its own when the guard
runs as root, Landlock (read the Python installation and the system, write the
workspace), seccomp (no network sockets, ptrace, mounts, namespaces, BPF, keyrings), and
a scrubbed environment.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from kernelkiln.errors import UserError
from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.worker import processes
from kernelkiln.isolation import namespaces, offer, paths
from kernelkiln.isolation.layers import (
    LAYERS,
    Confinement,
    Report,
    apply_filesystem,
    apply_kernel_filters,
    enter_namespaces,
    switch_user,
)

# Environment variables a worker may inherit; everything else (API keys included) is dropped.
ENV_ALLOW = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "PYTHONPATH",
    "PYTHONHASHSEED",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "CUDA_VISIBLE_DEVICES",
    "KILN_CACHE_DIR",
)

# Set by the guard per platform, never inherited: without a GPU, Triton kernels run under
# Triton's interpreter (numpy on the host), checkable but not timeable.
_PLATFORM_ENV = {"cpu": {"TRITON_INTERPRET": "1"}}

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)
_UID_BASE, _UID_SPAN = 200_000, 1 << 28
SLOTS_PER_PROCESS = 64


@dataclass
class SandboxSpec:
    """What the child applies to itself; built by the parent, sent to the child."""

    confinement: Confinement  # its uid: a user id of its own, when the guard runs as root
    memory_limit_mb: int
    file_size_limit_mb: int
    max_tasks: int
    env: dict[str, str] = field(default_factory=dict)
    # False on a GPU: its driver reserves far more address space than it uses, so RLIMIT_AS
    # would stop it from starting; the data segment (private writable memory) is limited instead.
    limit_address_space: bool = True
    cpus: list[int] | None = None  # cores the worker runs on (None: wherever the guard may)


def confinement(
    workspace: str, readable: list[str], *, gpu: bool, network: bool, filesystem: bool, uid: int | None
) -> Confinement:
    """A worker's confinement: read the system, the Python installation and ``readable``; write ``workspace``."""
    return Confinement(
        workspace=workspace,
        read=paths.readable(readable),
        devices=paths.devices(gpu),
        hide=paths.homes(),
        mask=list(paths.TEMPORARY),
        network=network,
        filesystem=filesystem,
        notify=True,
        uid=uid,
    )


def required_layers(config: GuardConfig) -> list[str]:
    """The layers the strict policy requires around every worker: each that this kernel
    offers (``kiln machine`` lists them) and the configuration turns on. [] when best-effort."""
    if config.isolation != "strict":
        return []
    off = {"network"} if not config.isolate_network else set()
    off |= {"filesystem"} if not config.isolate_filesystem else set()
    offered = offer.offered()
    layers = [layer for layer in LAYERS if layer not in off and layer in offered and offered[layer] is None]
    if config.isolate_user and can_switch_user():
        layers.append("user")
    return layers


def refuse_unless_held(required: list[str], held: dict[str, bool], notes: dict[str, str], where: str) -> None:
    """The strict policy: one line naming the first required layer that did not hold, and why."""
    for layer in required:
        if not held.get(layer):
            why = notes.get(layer, "not applied")
            raise UserError(
                f"isolation is strict and the {layer} layer, which this kernel offers, did not hold "
                f"around {where} ({why}); use --isolation best-effort to run without it"
            )


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


def spawn(
    spec: SandboxSpec, run: Callable[[Report, int], None], channel: int, inherited: list[int]
) -> tuple[int, int | str]:
    """Fork a worker that runs ``run(report, namespace_flags)`` (called in the fork-server).
    Returns the process to wait for, and the worker's pid or why it could not start.

    The first child leaves the guard's namespaces; with a PID namespace it forks the worker
    as that namespace's first process and stays to mirror its exit, so that the worker's
    end kills everything it started. Children close ``inherited``; only the worker keeps
    ``channel``, its socket to the guard."""
    ready, tell = os.pipe()
    first = os.fork()
    if first == 0:
        os.close(ready)
        for fd in inherited:
            os.close(fd)
        code = 1
        try:
            code = _first_child(spec, channel, run, tell)
        except BaseException as exc:
            with contextlib.suppress(OSError):
                os.write(tell, f"!{type(exc).__name__}: {exc}".encode()[:500])
        finally:
            os._exit(code)
    os.close(tell)
    with os.fdopen(ready, "rb") as fh:
        told = fh.read().decode(errors="replace")
    if told.startswith("!") or not told:
        return first, told[1:] or "the worker's first process died"
    return first, int(told)


def _first_child(spec: SandboxSpec, channel: int, run: Callable[[Report, int], None], tell: int) -> int:
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    report = Report()
    flags = enter_namespaces(spec.confinement, report, pids=True)
    if not flags & namespaces.CLONE_NEWPID:
        _tell(tell, os.getpid())
        run(report, flags)
        return 0
    worker = os.fork()
    if worker == 0:
        os.close(tell)
        run(report, flags)
        return 0
    _tell(tell, worker)
    os.close(channel)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _, status = os.waitpid(worker, 0)
    if os.WIFSIGNALED(status):  # die the same way, so the fork-server reports the worker's signal
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.waitstatus_to_exitcode(status)


def _tell(fd: int, pid: int) -> None:
    os.write(fd, str(pid).encode())
    os.close(fd)


def enter(spec: SandboxSpec, report: Report, flags: int) -> dict[str, bool]:
    """Apply every isolation layer to the calling worker (after ``spawn``'s namespaces); which held."""
    conf = spec.confinement
    applied = report.held
    if spec.cpus:  # first, so every thread the worker starts inherits the mask
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, spec.cpus)
    with contextlib.suppress(OSError):
        os.setsid()
    applied["session"] = os.getsid(0) == os.getpid()
    applied["parent_death_signal"] = _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    apply_filesystem(conf, report, flags)
    if flags & namespaces.CLONE_NEWPID:
        applied["pids"] = os.getpid() == 1
        if applied.get("filesystem"):
            try:
                namespaces.mount_proc()
            except OSError as exc:
                report.notes["pids"] = f"/proc still lists the host's processes ({exc.strerror})"
    workspace = "/tmp" if applied.get("filesystem") else conf.workspace  # the workspace now sits on /tmp
    _limit_resources(spec, own_user_namespace=bool(flags & namespaces.CLONE_NEWUSER))
    applied["resource_limits"] = True
    switch_user(conf, report)
    os.chdir(workspace)
    os.environ.clear()
    os.environ.update(
        {
            **spec.env,
            "HOME": workspace,
            "TMPDIR": workspace,
            "TRITON_HOME": workspace,
            "TRITON_CACHE_DIR": os.path.join(workspace, ".triton", "cache"),
        }
    )
    tempfile.tempdir = workspace
    _redirect_stdio(workspace)
    applied["environment"] = True
    apply_kernel_filters(conf.replace(workspace=workspace), report, bool(flags & namespaces.CLONE_NEWUSER))
    return applied


def hand_over_listener(conn: Connection, listener: int | None) -> None:
    """Pass the seccomp listener (or its absence) to the guard: one byte, before anything else."""
    channel = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        if listener is None:
            channel.sendall(b"N")
        else:
            socket.send_fds(channel, [b"F"], [listener])
            os.close(listener)
    finally:
        channel.close()


def take_listener(conn: Connection, timeout: float) -> int | None:
    """The guard's side of ``hand_over_listener``; raises EOFError when the worker died first."""
    if not conn.poll(timeout):
        raise TimeoutError("the worker did not finish its isolation")
    channel = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        data, fds, _, _ = socket.recv_fds(channel, 1, 1)
    finally:
        channel.close()
    if not data:
        raise EOFError("the worker exited while isolating itself")
    return fds[0] if fds else None


def _limit_resources(spec: SandboxSpec, own_user_namespace: bool) -> None:
    mb = 1 << 20
    limits = {
        resource.RLIMIT_AS if spec.limit_address_space else resource.RLIMIT_DATA: spec.memory_limit_mb * mb,
        resource.RLIMIT_FSIZE: spec.file_size_limit_mb * mb,
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_NOFILE: 256,
    }
    if spec.confinement.uid is not None or own_user_namespace:
        # Counted per user id and user namespace: only the worker's own processes count.
        limits[resource.RLIMIT_NPROC] = spec.max_tasks
    elif os.geteuid() != 0:  # sharing the user's id: allow what the user already runs, plus the budget
        limits[resource.RLIMIT_NPROC] = processes.tasks_of_user(os.getuid()) + spec.max_tasks
    for which, value in limits.items():
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, value))


def _redirect_stdio(workspace: str) -> None:
    # Nothing a candidate prints is read by the guard; it goes to a capped log file.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    log = os.open(os.path.join(workspace, "worker.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
