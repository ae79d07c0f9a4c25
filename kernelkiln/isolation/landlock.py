"""Landlock: the unprivileged Linux LSM that confines a process to the paths it is given.

``restrict`` turns the calling process (and everything it forks or execs afterwards) into a
Landlock domain: outside the ``read``, ``write`` and ``devices`` paths nothing can be read,
written, listed or executed; on ABI >= 4 every TCP bind and connect is refused; on ABI >= 6
it cannot signal processes outside its domain (the guard) nor reach their abstract unix
sockets. With no extra rule, Landlock also keeps the domain from ptrace-ing processes outside
it or reading their /proc/PID/environ and /proc/PID/mem (though on Linux 6.18 a process with
CAP_SYS_ADMIN or CAP_PERFMON still reads environ: run confined code without capabilities).
A domain cannot be left, only narrowed.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Callable, Iterable

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # x86_64 and aarch64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_TRUNCATE, _IOCTL_DEV = 1 << 14, 1 << 15
# Filesystem rights by the ABI that introduced them: EXECUTE..MAKE_SYM (bits 0..12), REFER,
# TRUNCATE, IOCTL_DEV (ABI 4 added network rights only).
_FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: 1 << 13, 3: _TRUNCATE, 5: _IOCTL_DEV}
# The only rights Landlock accepts on a rule for a file that is not a directory.
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _call(function: Callable[..., int], *args: int | ctypes.c_void_p) -> int:
    """Calls a libc function; returns its result, or ``-errno`` on failure."""
    # syscall and prctl are variadic: every argument must be passed as a full machine word.
    words = [arg if isinstance(arg, ctypes.c_void_p) else ctypes.c_long(arg) for arg in args]
    result = function(*words)
    return -ctypes.get_errno() if result < 0 else result


def _probe() -> int:
    """The kernel's Landlock ABI version, or ``-errno`` when it has none."""
    return _call(_libc.syscall, _SYS_CREATE_RULESET, ctypes.c_void_p(None), 0, _CREATE_RULESET_VERSION)


def abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is unavailable."""
    return max(_probe(), 0)


def unavailable_reason() -> str | None:
    """One line saying why Landlock is unavailable; None when it is available."""
    version = _probe()
    if version > 0:
        return None
    if -version == errno.ENOSYS:
        return "the kernel has no Landlock (Linux >= 5.13 with CONFIG_SECURITY_LANDLOCK)"
    if -version == errno.EOPNOTSUPP:
        return "Landlock is disabled (add landlock to the lsm= boot parameter)"
    return f"Landlock is unavailable: {os.strerror(-version)}"


def _handled_fs(version: int) -> int:
    return sum(rights for since, rights in _FS_RIGHTS_BY_ABI.items() if version >= since)


def _ruleset_attr(version: int) -> tuple[_RulesetAttr, int]:
    """The ruleset attribute and the size of it that ``version`` understands."""
    attr = _RulesetAttr(handled_access_fs=_handled_fs(version))
    if version < 4:
        return attr, 8
    attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
    if version < 6:
        return attr, 16
    attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
    return attr, 24


def _check(result: int, step: str) -> int:
    if result < 0:
        raise OSError(-result, f"{step}: {os.strerror(-result)}")
    return result


def _allow(ruleset: int, path: str, rights: int) -> None:
    """Grants ``rights`` beneath ``path`` (narrowed to file rights for a non-directory)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS
        rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        _check(
            _call(
                _libc.syscall, _SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.c_void_p(ctypes.addressof(rule)), 0
            ),
            f"landlock_add_rule({path!r})",
        )
    finally:
        os.close(fd)


def restrict(read: Iterable[str], write: Iterable[str], devices: Iterable[str] = ()) -> int:
    """Confines this process to ``read`` (read and execute), ``write`` (every right: a
    workspace) and ``devices`` (read, write and ioctl on character devices such as /dev/null).

    Paths that do not exist are skipped. Returns the ABI used; raises ``OSError`` naming the
    step that failed. Landlock applies to the calling thread only (and what it starts later):
    call this while the process is single-threaded.
    """
    version = _probe()
    if version <= 0:
        raise OSError(-version, unavailable_reason())
    attr, size = _ruleset_attr(version)
    ruleset = _check(
        _call(_libc.syscall, _SYS_CREATE_RULESET, ctypes.c_void_p(ctypes.addressof(attr)), size, 0),
        "landlock_create_ruleset",
    )
    try:
        device_rights = _READ_FILE | _WRITE_FILE | (_IOCTL_DEV if version >= 5 else 0)
        for path in read:
            _allow(ruleset, path, _EXECUTE | _READ_FILE | _READ_DIR)
        for path in write:
            _allow(ruleset, path, attr.handled_access_fs)
        for path in devices:
            _allow(ruleset, path, device_rights)
        _check(_call(_libc.prctl, _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(_call(_libc.syscall, _SYS_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return version
