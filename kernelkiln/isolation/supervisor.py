"""Answers a worker's denied system calls (a seccomp notify-mode listener) with EPERM, and
records each attempt, so the verdict can say what the candidate tried."""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import select
import socket
import struct
import threading

from kernelkiln.isolation.seccomp import GET_NOTIF_SIZES, NAMESPACE_FLAGS, X32_BIT, call, current_arch

# struct seccomp_notif {u64 id; u32 pid; u32 flags; struct seccomp_data data}, and
# struct seccomp_notif_resp {u64 id; s64 val; s32 error; u32 flags}.
_NOTIF = struct.Struct("=QIIiIQ6Q")
_RESP = struct.Struct("=QqiI")


def _iowr(nr: int, size: int) -> int:
    return 3 << 30 | size << 16 | ord("!") << 8 | nr


_NOTIF_RECV = _iowr(0, _NOTIF.size)
_NOTIF_SEND = _iowr(1, _RESP.size)


def describe(nr: int, audit: int, arg0: int) -> str:
    """A denied call as the verdict names it: ``socket(AF_INET)``, ``clone(CLONE_NEWUSER)``, ``ptrace``."""
    arch = current_arch()
    if audit != arch.audit:
        return f"syscall {nr} (arch {audit:#x})"
    if arch.checks_x32 and nr & X32_BIT:
        return f"x32 syscall {nr & ~X32_BIT}"
    name = next((n for n, number in arch.numbers.items() if number == nr), f"syscall {nr}")
    low = arg0 & 0xFFFFFFFF
    if name in ("socket", "socketpair"):
        try:
            return f"{name}({socket.AddressFamily(low).name})"
        except ValueError:
            return f"{name}({low})"
    if name == "clone":
        return f"clone({'|'.join(f for f, bit in NAMESPACE_FLAGS.items() if low & bit)})"
    return name


class Supervisor:
    """Answers a notify-mode listener fd with EPERM from a daemon thread, recording each attempt.

    The thread ends when every process using the filter is gone, or on ``close()``; it
    closes the listener as it ends, so a call made after that fails at once (ENOSYS)
    instead of waiting for an answer that would never come."""

    MAX_DENIED = 20

    def __init__(self, fd: int) -> None:
        sizes = (ctypes.c_uint16 * 3)()
        call(GET_NOTIF_SIZES, 0, ctypes.byref(sizes))
        self._notif_size, self._resp_size = sizes[0], sizes[1]
        if self._notif_size < _NOTIF.size or self._resp_size < _RESP.size:
            os.close(fd)
            raise OSError(errno.EINVAL, f"seccomp notification sizes {tuple(sizes)} too small")
        self._fd = fd
        self._lock = threading.Lock()
        self._denied: list[str] = []
        self._closed = False
        self._wake_r, self._wake_w = os.pipe()  # close() writes here to stop the poll promptly
        self._thread = threading.Thread(target=self._serve, name="seccomp-supervisor", daemon=True)
        self._thread.start()

    def denied(self) -> list[str]:
        """What was attempted: distinct names in first-seen order, at most MAX_DENIED."""
        with self._lock:
            return list(self._denied)

    def close(self) -> None:
        """Stop answering and join the thread; idempotent. ``denied()`` still answers after."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        os.write(self._wake_w, b"\0")
        self._thread.join()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)

    def _serve(self) -> None:
        poller = select.poll()
        poller.register(self._fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        try:
            while True:
                for fd, events in poller.poll():
                    if fd == self._wake_r or events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                        return
                    self._answer()
        except OSError:
            return  # the listener broke: closing it below makes every later call fail fast
        finally:
            os.close(self._fd)

    def _answer(self) -> None:
        request = bytearray(self._notif_size)  # RECV rejects a buffer that is not zeroed
        try:
            fcntl.ioctl(self._fd, _NOTIF_RECV, request, True)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.EINTR):  # the task died or the wait was interrupted
                return
            raise
        ident, _pid, _flags, nr, audit, _ip, arg0, *_ = _NOTIF.unpack_from(request)
        name = describe(nr, audit, arg0)
        with self._lock:
            if name not in self._denied and len(self._denied) < self.MAX_DENIED:
                self._denied.append(name)
        response = bytearray(self._resp_size)
        _RESP.pack_into(response, 0, ident, 0, -errno.EPERM, 0)
        try:
            fcntl.ioctl(self._fd, _NOTIF_SEND, response, True)
        except OSError as exc:
            if exc.errno != errno.ENOENT:  # ENOENT: the task died while we answered
                raise
