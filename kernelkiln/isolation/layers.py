"""The isolation layers, applied in order by a process to itself, each reported.

``Confinement`` says what to apply; ``apply`` applies the layers shared by the guard's
workers and the native compiler: namespaces' mounts, capabilities, Landlock, seccomp.
Every layer that fails is recorded with its reason, never raised: the caller's policy
(strict or best-effort) decides what a missing layer means.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from kernelkiln.isolation import landlock, namespaces, seccomp

# Every layer a report may name, in the order they are applied.
LAYERS = ("user_namespace", "network", "filesystem", "pids", "user", "landlock", "seccomp")
_NAMESPACE_LAYERS = (
    ("network", namespaces.CLONE_NEWNET),
    ("filesystem", namespaces.CLONE_NEWNS),
    ("pids", namespaces.CLONE_NEWPID),
)


class Confinement:
    """What a confined process applies to itself (built by the trusted parent). A plain class,
    not a dataclass: the compiler's launcher imports this on every build, and fast."""

    def __init__(
        self,
        workspace: str,
        read: list[str] | None = None,
        devices: list[str] | None = None,
        hide: list[str] | None = None,
        mask: list[str] | None = None,
        *,
        network: bool = True,
        filesystem: bool = True,
        pids: bool = True,
        landlock: bool = True,
        seccomp: bool = True,
        notify: bool = False,
        uid: int | None = None,
        gid: int | None = None,
    ):
        self.workspace = workspace  # the one directory it may write
        self.read = list(read or [])  # what it may read and execute
        self.devices = list(devices or [])  # character devices it may open read-write
        self.hide = list(hide or [])  # directories made empty (home directories)
        self.mask = list(mask or [])  # directories replaced by the workspace (/tmp, ...)
        self.network = network  # an empty network namespace
        self.filesystem = filesystem  # the mounts above, in a mount namespace of its own
        self.pids = pids  # a PID namespace whose first process is the confined one
        self.landlock = landlock
        self.seccomp = seccomp
        self.notify = notify  # denied system calls reported to the parent (a seccomp listener)
        self.uid = uid  # switch to this user (and gid) after the mounts: root's extra layer
        self.gid = gid

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    def replace(self, **changes: object) -> Confinement:
        return Confinement(**{**self.to_dict(), **changes})


class Report:
    """Which layers held, and for each that did not, why."""

    def __init__(self, held: dict[str, bool] | None = None, notes: dict[str, str] | None = None):
        self.held: dict[str, bool] = dict(held or {})
        self.notes: dict[str, str] = dict(notes or {})
        self.listener: int | None = None  # the seccomp listener fd (notify mode)

    def attempt(self, layer: str, step: Callable[[], object]) -> bool:
        try:
            step()
        except OSError as exc:
            self.held[layer] = False
            self.notes[layer] = reason_of(exc)
            return False
        self.held[layer] = True
        return True

    def skip(self, layer: str, why: str) -> None:
        self.held[layer] = False
        self.notes[layer] = why


def reason_of(exc: OSError) -> str:
    """One line: what failed (the step's message, or the file) and the system's reason."""
    if exc.filename is not None:
        return f"{exc.strerror}: {exc.filename}"
    return str(exc.args[1]) if len(exc.args) > 1 else str(exc)


def namespace_flags(conf: Confinement, *, pids: bool) -> int:
    """The unshare(2) flags ``conf`` asks for, a user namespace included where not root."""
    flags = 0
    if conf.network:
        flags |= namespaces.CLONE_NEWNET
    if conf.filesystem:
        flags |= namespaces.CLONE_NEWNS
    if pids and conf.pids:
        flags |= namespaces.CLONE_NEWPID
    if flags and os.geteuid() != 0:
        flags |= namespaces.CLONE_NEWUSER
    return flags


def enter_namespaces(conf: Confinement, report: Report, *, pids: bool) -> int:
    """Leave the caller's namespaces (single-threaded caller); the flags that held (0: none)."""
    flags = namespace_flags(conf, pids=pids)
    if not flags:
        return 0
    try:
        namespaces.unshare(flags)
    except OSError as exc:
        reason = reason_of(exc)
        if flags & namespaces.CLONE_NEWUSER:
            forbidden = namespaces.userns_forbidden_by()
            reason = f"unprivileged user namespaces are forbidden here ({forbidden})" if forbidden else reason
            report.skip("user_namespace", reason)
        for layer, flag in _NAMESPACE_LAYERS:
            if flags & flag:
                report.skip(layer, f"no {layer} namespace: {reason}")
        return 0
    if flags & namespaces.CLONE_NEWUSER:
        report.held["user_namespace"] = True
    if flags & namespaces.CLONE_NEWNET:
        report.held["network"] = True
    return flags


def apply_filesystem(conf: Confinement, report: Report, flags: int) -> None:
    """Hide homes and mask temporary directories (needs the mount namespace of ``flags``)."""
    if conf.filesystem and flags & namespaces.CLONE_NEWNS:  # without it, enter_namespaces said why
        report.attempt("filesystem", lambda: namespaces.rearrange(conf.workspace, conf.mask, conf.hide, conf.read))


def switch_user(conf: Confinement, report: Report) -> None:
    """Become ``conf.uid`` (a user id of its own), when root asked for one. Raises when it
    cannot: code that was to run as another user never runs as root instead."""
    if conf.uid is None:
        return
    os.setgroups([])
    os.setgid(conf.uid if conf.gid is None else conf.gid)
    os.setuid(conf.uid)
    report.held["user"] = os.getuid() == conf.uid


def apply_kernel_filters(conf: Confinement, report: Report, user_namespace: bool) -> None:
    """Capabilities, Landlock, then seccomp last (it refuses the mounts made before it)."""
    if user_namespace:  # the capabilities it granted over its own namespaces go too
        report.attempt("user_namespace", namespaces.drop_capabilities)
    if conf.landlock:
        why = landlock.unavailable_reason()
        if why:
            report.skip("landlock", why)
        else:
            report.attempt("landlock", lambda: landlock.restrict([*conf.read], [conf.workspace], conf.devices))
    if conf.seccomp:
        why = seccomp.supported()
        if why:
            report.skip("seccomp", why)
        else:

            def install() -> None:
                report.listener = seccomp.install(notify=conf.notify)

            report.attempt("seccomp", install)
