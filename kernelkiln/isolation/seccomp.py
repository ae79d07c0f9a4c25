"""A seccomp-bpf filter that makes a fixed set of dangerous system calls fail with EPERM.

The filter covers the calling process and everything it forks or execs. Denied calls fail
rather than kill, so the guard can report what a candidate attempted; in notify mode a
``supervisor.Supervisor`` in another process answers them and records each attempt.
Imports stay few: the compiler's launcher loads this module on every build.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_USER_NOTIF = 0x7FC00000
_SET_MODE_FILTER = 1
GET_NOTIF_SIZES = 3
_FLAG_NEW_LISTENER = 1 << 3
_PR_SET_NO_NEW_PRIVS = 38

_LD_ABS_W, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets into struct seccomp_data
X32_BIT = 0x40000000
_AF_UNIX = 1

NAMESPACE_FLAGS = {
    "CLONE_NEWTIME": 0x80,
    "CLONE_NEWNS": 0x20000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}


class _Arch:
    """One architecture's audit id, seccomp(2) number, and the numbers of the calls filtered."""

    def __init__(self, audit: int, seccomp_nr: int, checks_x32: bool, numbers: dict[str, int]):
        self.audit, self.seccomp_nr, self.checks_x32, self.numbers = audit, seccomp_nr, checks_x32, numbers


_ARCHES = {
    "x86_64": _Arch(
        0xC000003E,
        317,
        True,
        {
            "socket": 41,
            "socketpair": 53,
            "clone": 56,
            "clone3": 435,
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "chroot": 161,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "unshare": 272,
            "setns": 308,
            "bpf": 321,
            "perf_event_open": 298,
            "keyctl": 250,
            "add_key": 248,
            "request_key": 249,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "userfaultfd": 323,
            "kexec_load": 246,
            "kexec_file_load": 320,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "open_by_handle_at": 304,
            "name_to_handle_at": 303,
            "pidfd_getfd": 438,
            "kcmp": 312,
            "acct": 163,
            "swapon": 167,
            "swapoff": 168,
            "reboot": 169,
            "syslog": 103,
            "iopl": 172,
            "ioperm": 173,
            "settimeofday": 164,
            "clock_settime": 227,
            "clock_adjtime": 305,
            "adjtimex": 159,
            "fanotify_init": 300,
            "quotactl": 179,
            "vhangup": 153,
        },
    ),
    "aarch64": _Arch(
        0xC00000B7,
        277,
        False,
        {
            "socket": 198,
            "socketpair": 199,
            "clone": 220,
            "clone3": 435,
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "chroot": 51,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsconfig": 431,
            "fsmount": 432,
            "fspick": 433,
            "mount_setattr": 442,
            "unshare": 97,
            "setns": 268,
            "bpf": 280,
            "perf_event_open": 241,
            "keyctl": 219,
            "add_key": 217,
            "request_key": 218,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "userfaultfd": 282,
            "kexec_load": 104,
            "kexec_file_load": 294,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "open_by_handle_at": 265,
            "name_to_handle_at": 264,
            "pidfd_getfd": 438,
            "kcmp": 272,
            "acct": 89,
            "swapon": 224,
            "swapoff": 225,
            "reboot": 142,
            "syslog": 116,
            "settimeofday": 170,
            "clock_settime": 112,
            "clock_adjtime": 266,
            "adjtimex": 171,
            "fanotify_init": 262,
            "quotactl": 60,
            "vhangup": 58,
        },
    ),
}
_CONDITIONAL = ("socket", "socketpair", "clone", "clone3")


def _machine() -> str:
    return os.uname().machine


def supported() -> str | None:
    """None when this architecture's filter is built in, else why it is not."""
    machine = _machine()
    return None if machine in _ARCHES else f"no seccomp filter for architecture {machine!r}"


ARCH_SUPPORTED: bool = supported() is None


def current_arch() -> _Arch:
    """This machine's architecture entry; OSError(ENOSYS) where none is built in."""
    reason = supported()
    if reason:
        raise OSError(errno.ENOSYS, reason)
    return _ARCHES[_machine()]


def program(notify: bool) -> bytes:
    """The filter as an array of `struct sock_filter` for this architecture."""
    arch = current_arch()
    deny = _RET_USER_NOTIF if notify else _RET_ERRNO | errno.EPERM
    # (code, jt, jf, k); a str jump target names a label below, resolved into an offset.
    ops: list[tuple[int, int | str, int | str, int]] = [
        (_LD_ABS_W, 0, 0, _ARCH),
        (_JEQ, 0, "deny", arch.audit),
        (_LD_ABS_W, 0, 0, _NR),
    ]
    if arch.checks_x32:
        ops.append((_JSET, "deny", 0, X32_BIT))
    ops += [(_JEQ, "deny", 0, nr) for name, nr in arch.numbers.items() if name not in _CONDITIONAL]
    ops += [
        (_JEQ, "enosys", 0, arch.numbers["clone3"]),
        (_JEQ, "socket", 0, arch.numbers["socket"]),
        (_JEQ, "socket", 0, arch.numbers["socketpair"]),
        (_JEQ, "clone", "allow", arch.numbers["clone"]),
    ]
    labels = {
        "socket": len(ops),
        "clone": len(ops) + 2,
        "enosys": len(ops) + 4,
        "deny": len(ops) + 5,
        "allow": len(ops) + 6,
    }
    ops += [
        (_LD_ABS_W, 0, 0, _ARG0),
        (_JEQ, "allow", "deny", _AF_UNIX),
        (_LD_ABS_W, 0, 0, _ARG0),
        (_JSET, "deny", "allow", sum(NAMESPACE_FLAGS.values())),
        (_RET, 0, 0, _RET_ERRNO | errno.ENOSYS),
        (_RET, 0, 0, deny),
        (_RET, 0, 0, _RET_ALLOW),
    ]

    def offset(at: int, target: int | str) -> int:
        return target if isinstance(target, int) else labels[target] - at - 1

    return b"".join(
        struct.pack("=HBBI", code, offset(i, jt), offset(i, jf), k) for i, (code, jt, jf, k) in enumerate(ops)
    )


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def call(op: int, flags: int, arg: ctypes.c_void_p | ctypes._CArgObject | int) -> int:
    ret: int = _libc.syscall(ctypes.c_long(current_arch().seccomp_nr), ctypes.c_ulong(op), ctypes.c_ulong(flags), arg)
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {os.strerror(err)}")
    return ret


def install(notify: bool = False) -> int | None:
    """Set no_new_privs and install the filter on the calling process.

    Call while the process is single-threaded: only the calling thread (and what it
    later creates) is filtered. With `notify` denied calls wait for a `Supervisor` and
    the listener fd is returned; otherwise they fail with EPERM and None is returned.
    """
    code = program(notify)
    if (
        _libc.prctl(_PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
        != 0
    ):
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    fd = call(_SET_MODE_FILTER, _FLAG_NEW_LISTENER if notify else 0, ctypes.byref(prog))
    return fd if notify else None
