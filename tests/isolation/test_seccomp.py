"""The seccomp filter: what it denies, what it leaves working, and the notify-mode supervisor.

The filter cannot be removed once installed, so every sandboxed check runs in a fresh child.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernelkiln.isolation import seccomp
from kernelkiln.isolation import supervisor as supervisor_module

REPO = Path(__file__).resolve().parents[2]

# Helpers for the child: raw syscall numbers independent of the module's own table.
CHILD_PRELUDE = """
import ctypes, errno, os, platform, signal, socket, subprocess, sys, threading
from kernelkiln.isolation import seccomp

libc = ctypes.CDLL(None, use_errno=True)
SYS = {"x86_64": {"clone": 56, "clone3": 435}, "aarch64": {"clone": 220, "clone3": 435}}[platform.machine()]
CLONE_NEWUSER = 0x10000000
PTRACE_TRACEME = 0

def ptrace_traceme():
    return libc.ptrace(PTRACE_TRACEME, ctypes.c_long(0), ctypes.c_long(0), ctypes.c_long(0))

def fails_with(code, call):
    ctypes.set_errno(0)
    try:
        result = call()
    except OSError as exc:
        assert exc.errno == code, exc
        return
    assert result == -1 and ctypes.get_errno() == code, (result, ctypes.get_errno())

def clone_new_user():
    zero = ctypes.c_long(0)
    pid = libc.syscall(SYS["clone"], ctypes.c_long(CLONE_NEWUSER | signal.SIGCHLD), zero, zero, zero, zero)
    if pid == 0:
        os._exit(0)
    return pid
"""


def _unavailable() -> str | None:
    reason = seccomp.supported()
    if reason:
        return reason
    with open("/proc/self/status") as status:
        if not any(line.startswith("Seccomp:") for line in status):
            return "this kernel has no seccomp support"
    return None


@pytest.fixture
def sandboxed():
    """Runs a snippet in a fresh child after `seccomp.install()`; fails the test if it fails."""
    reason = _unavailable()
    if reason:
        pytest.skip(reason)

    def run(body: str) -> str:
        code = CHILD_PRELUDE + "seccomp.install()\n" + textwrap.dedent(body)
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    return run


def test_internet_sockets_fail_with_eperm_while_unix_socket_pairs_work(sandboxed):
    sandboxed("""
        fails_with(errno.EPERM, lambda: socket.socket(socket.AF_INET))
        fails_with(errno.EPERM, lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
        fails_with(errno.EPERM, lambda: socket.socketpair(socket.AF_INET))
        a, b = socket.socketpair()
        a.sendall(b"ok")
        assert b.recv(2) == b"ok"
    """)


def test_creating_namespaces_fails_with_eperm(sandboxed):
    sandboxed("""
        fails_with(errno.EPERM, lambda: libc.unshare(CLONE_NEWUSER))
        fails_with(errno.EPERM, clone_new_user)
    """)


def test_ptrace_fails_with_eperm(sandboxed):
    sandboxed("""
        fails_with(errno.EPERM, ptrace_traceme)
    """)


def test_fork_threads_and_exec_keep_working_because_clone3_falls_back_to_clone(sandboxed):
    sandboxed("""
        fails_with(errno.ENOSYS, lambda: libc.syscall(SYS["clone3"], None, ctypes.c_size_t(0)))
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7
        seen = []
        thread = threading.Thread(target=seen.append, args=(1,))
        thread.start()
        thread.join()
        assert seen == [1]
        assert subprocess.run(["true"]).returncode == 0
    """)


def test_programs_started_under_the_filter_inherit_it(sandboxed):
    sandboxed("""
        child = subprocess.run([sys.executable, "-c", "import socket; socket.socket()"],
                               capture_output=True, text=True)
        assert child.returncode != 0 and "Operation not permitted" in child.stderr, child.stderr
    """)


def test_a_supervisor_in_the_parent_records_denied_calls_and_answers_eperm():
    reason = _unavailable()
    if reason:
        pytest.skip(reason)
    body = """
        channel = socket.socket(fileno=int(sys.argv[1]))
        listener = seccomp.install(notify=True)
        socket.send_fds(channel, [b"L"], [listener])
        os.close(listener)
        fails_with(errno.EPERM, lambda: socket.socket(socket.AF_INET))
        fails_with(errno.EPERM, lambda: socket.socket(socket.AF_INET))
        fails_with(errno.EPERM, lambda: libc.unshare(CLONE_NEWUSER))
        fails_with(errno.EPERM, clone_new_user)
        fails_with(errno.EPERM, ptrace_traceme)
        fails_with(errno.ENOSYS, lambda: libc.syscall(SYS["clone3"], None, ctypes.c_size_t(0)))
        socket.socketpair()
        print("finished")
    """
    parent_end, child_end = socket.socketpair()
    with parent_end, child_end:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD_PRELUDE + textwrap.dedent(body), str(child_end.fileno())],
            pass_fds=[child_end.fileno()],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        child_end.close()  # so a child that dies early unblocks recv_fds
        _, fds, _, _ = socket.recv_fds(parent_end, 1, 1)
    if not fds:
        pytest.fail(f"the child sent no listener fd: {proc.communicate(timeout=60)[1]}")
    supervisor = supervisor_module.Supervisor(fds[0])
    try:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and out == "finished\n", err
        assert supervisor.denied() == ["socket(AF_INET)", "unshare", "clone(CLONE_NEWUSER)", "ptrace"]
        # With every filtered process gone the listener hangs up and the thread stops by itself.
        supervisor._thread.join(timeout=10)
        assert not supervisor._thread.is_alive()
    finally:
        supervisor.close()


def test_closing_a_supervisor_is_prompt_and_idempotent():
    reason = _unavailable()
    if reason:
        pytest.skip(reason)
    never_ready, writer = os.pipe()
    supervisor = supervisor_module.Supervisor(never_ready)
    started = time.monotonic()
    supervisor.close()
    supervisor.close()
    os.close(writer)
    assert time.monotonic() - started < 1
    assert supervisor.denied() == []


@pytest.mark.parametrize("notify", [False, True])
def test_the_program_is_whole_instructions_ending_in_allow(notify):
    if seccomp.supported():
        pytest.skip(seccomp.supported())
    code = seccomp.program(notify)
    assert len(code) % 8 == 0
    instructions = [struct.unpack_from("=HBBI", code, at) for at in range(0, len(code), 8)]
    ret_allow, ret_eperm, ret_notify = (0x06, 0, 0, 0x7FFF0000), (0x06, 0, 0, 0x50001), (0x06, 0, 0, 0x7FC00000)
    assert instructions[-1] == ret_allow
    assert (ret_notify if notify else ret_eperm) in instructions
    assert (ret_eperm if notify else ret_notify) not in instructions


def test_unknown_architectures_are_reported_and_never_filtered():
    code = """
import errno, socket
from kernelkiln.isolation import seccomp
seccomp._machine = lambda: "riscv64"
assert "riscv64" in seccomp.supported()
try:
    seccomp.install()
except OSError as exc:
    assert exc.errno == errno.ENOSYS
else:
    raise AssertionError("install() succeeded on an unknown architecture")
socket.socket(socket.AF_INET).close()
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
