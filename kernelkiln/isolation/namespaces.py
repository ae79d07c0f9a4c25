"""Linux namespaces a process can enter without root, and the mounts made inside them.

An unprivileged process enters a user namespace of its own (its uid and gid mapped to
themselves, so files it owns stay its own) together with a mount, a network and a PID
namespace. Inside, it holds every capability over those namespaces only: enough to
hide directories and bind others read-only, never to reach what its user could not.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 0x400, 0x800, 0x200000
_MNT_DETACH = 0x2
# statvfs flags -> the mount flags a remount must repeat: in a user namespace, flags of a
# mount inherited from outside are locked, and a remount that drops one fails with EPERM.
_LOCKED = (
    (os.ST_RDONLY, _MS_RDONLY),
    (os.ST_NOSUID, _MS_NOSUID),
    (os.ST_NODEV, _MS_NODEV),
    (os.ST_NOEXEC, _MS_NOEXEC),
    (os.ST_NOATIME, _MS_NOATIME),
    (os.ST_NODIRATIME, _MS_NODIRATIME),
    (os.ST_RELATIME, _MS_RELATIME),
)

# Sysctls with which distributions forbid unprivileged user namespaces (value that forbids).
_USERNS_SYSCTLS = (
    ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1"),
    ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
    ("/proc/sys/user/max_user_namespaces", "0"),
)

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def userns_forbidden_by() -> str | None:
    """The sysctl that forbids unprivileged user namespaces here, as ``name = value``, if any."""
    for path, forbids in _USERNS_SYSCTLS:
        try:
            with open(path) as fh:
                value = fh.read().strip()
        except OSError:
            continue
        if value == forbids:
            return f"{path.split('/proc/sys/')[-1].replace('/', '.')} = {value}"
    return None


def unshare(flags: int) -> None:
    """Leave the namespaces ``flags`` names. With CLONE_NEWUSER the caller's uid and gid map
    to themselves; the caller must be single-threaded."""
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(flags), "unshare")
    if flags & CLONE_NEWUSER:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def _locked_flags(path: str) -> int:
    flags = os.statvfs(path).f_flag
    return sum(ms for st, ms in _LOCKED if flags & st)


def covered(path: str, masked: Iterable[str]) -> str | None:
    """The masked directory ``path`` lies under (or is), if any."""
    real = os.path.realpath(path)
    for top in masked:
        if real == top or real.startswith(top.rstrip("/") + "/"):
            return top
    return None


def rearrange(workspace: str, masked: Iterable[str], hidden: Iterable[str], keep: Iterable[str]) -> None:
    """In a private mount namespace: ``masked`` directories become views of ``workspace``,
    ``hidden`` ones become empty and read-only, each ``keep`` path under either comes back
    read-only, and ``workspace`` itself, if hidden, comes back writable. Every source is
    opened before anything is covered; on failure every mount made is undone."""
    workspace = os.path.realpath(workspace)
    masked, hidden, keep = _plan(workspace, masked, hidden, keep)
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing below propagates back out
    fds = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in [workspace, *keep]}
    mounted: list[str] = []
    try:
        for target in masked:
            _mount(f"/proc/self/fd/{fds[workspace]}", target, None, _MS_BIND)
            mounted.append(target)
        for target in hidden:
            _mount("tmpfs", target, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=64k,mode=0755")
            mounted.append(target)
        for path in keep:
            _bind(fds[path], path)
            mounted.append(path)
            _mount(None, path, None, _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _locked_flags(path))
        if covered(workspace, hidden):
            _bind(fds[workspace], workspace)
            mounted.append(workspace)
        for target in hidden:  # mount points made; nothing more may be written there
            _mount(None, target, None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    except OSError:
        for target in reversed(mounted):
            _libc.umount2(target.encode(), _MNT_DETACH)
        raise
    finally:
        for fd in fds.values():
            os.close(fd)


def _plan(
    workspace: str, masked: Iterable[str], hidden: Iterable[str], keep: Iterable[str]
) -> tuple[list[str], list[str], list[str]]:
    """The directories to mask and hide, and the paths to bring back (each once, outermost only)."""
    masked = [m for m in masked if os.path.isdir(m)]
    hidden = [h for h in hidden if os.path.isdir(h) and not covered(h, masked)]
    hidden = [h for h in hidden if not covered(os.path.dirname(h), hidden)]  # /home covers /home/user
    covers = [*masked, *hidden]
    # A covered directory itself, or one just below a cover (a home directory), never comes back whole.
    real = {os.path.realpath(k) for k in keep if os.path.exists(k)}
    back = sorted(
        k
        for k in real - {workspace}
        if covered(k, covers) and k not in covers and os.path.dirname(k) not in ("/", *covers)
    )
    back = [k for i, k in enumerate(back) if not covered(k, back[:i])]  # a kept folder brings back its contents
    return masked, hidden, back


def _bind(fd: int, path: str) -> None:
    source = f"/proc/self/fd/{fd}"
    if os.path.isdir(source):
        os.makedirs(path, exist_ok=True)
    elif not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "a").close()
    _mount(source, path, None, _MS_BIND | _MS_REC)


def mount_proc() -> None:
    """A /proc of the caller's own PID namespace: only the processes inside are visible.
    The caller must be inside that namespace (its first process)."""
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)


def drop_capabilities() -> None:
    """Give up every capability (those a user namespace granted over itself included)."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.capset(header, data), "capset")
