"""Landlock: a restricted child reaches only the paths, devices and peers it was given.

Landlock cannot be undone, so each test restricts a fresh child interpreter and checks
from inside it (the child exits non-zero on a failed assertion).
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import sysconfig
import textwrap

import pytest

from kernelkiln.isolation import landlock

READABLE = sorted(
    {sys.prefix, sys.base_prefix, sysconfig.get_paths()["stdlib"], "/usr", "/bin", "/lib", "/lib64", "/etc", "/proc"}
)

PRELUDE = """\
import os, socket, subprocess, sys
from kernelkiln.isolation import landlock

def refused(action, *args):
    try:
        action(*args)
    except PermissionError:
        return True
    return False

assert landlock.restrict(read={read!r}, write=[{workspace!r}], devices=["/dev/null"]) \\
    == landlock.abi()
"""


def needs_abi(version: int) -> None:
    if landlock.abi() < version:
        pytest.skip(
            landlock.unavailable_reason() or f"needs Landlock ABI >= {version}, the kernel has {landlock.abi()}"
        )


def run_restricted(tmp_path, body: str, read: list[str] = READABLE) -> None:
    """Runs ``body`` in a child restricted to ``read`` and a workspace under ``tmp_path``."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    code = PRELUDE.format(read=read, workspace=str(workspace)) + textwrap.dedent(body)
    result = subprocess.run([sys.executable, "-c", code], cwd=workspace, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def outside(tmp_path):
    """A directory outside the child's rules, holding one planted file."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("secret")
    return path


def test_the_abi_is_reported_with_no_reason_for_unavailability():
    needs_abi(1)
    assert landlock.abi() >= 1 and landlock.unavailable_reason() is None


def test_a_kernel_without_landlock_is_reported_and_refuses_to_restrict(monkeypatch):
    monkeypatch.setattr(landlock, "_probe", lambda: -errno.ENOSYS)
    assert landlock.abi() == 0
    assert "CONFIG_SECURITY_LANDLOCK" in landlock.unavailable_reason()
    with pytest.raises(OSError) as raised:
        landlock.restrict(read=["/usr"], write=[])
    assert raised.value.errno == errno.ENOSYS


def test_files_outside_the_rules_can_be_neither_read_nor_listed(tmp_path, outside):
    needs_abi(1)
    run_restricted(
        tmp_path,
        f"""
        assert refused(open, {str(outside / "secret.txt")!r})
        assert refused(os.listdir, {str(outside)!r})
    """,
    )


def test_only_the_workspace_is_writable(tmp_path, outside):
    needs_abi(1)
    run_restricted(
        tmp_path,
        f"""
        with open("made-here.txt", "w") as f:
            f.write("ok")
        assert refused(open, {str(outside / "new.txt")!r}, "w")
        assert refused(open, {str(outside / "secret.txt")!r}, "a")
    """,
    )
    assert (tmp_path / "workspace" / "made-here.txt").read_text() == "ok"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_single_files_and_devices_can_be_granted_and_missing_paths_are_skipped(tmp_path, outside):
    needs_abi(1)
    (outside / "granted.txt").write_text("granted")
    granted, missing = str(outside / "granted.txt"), str(tmp_path / "missing")
    read = [*READABLE, granted, missing, "/usr"]  # /usr a second time
    run_restricted(
        tmp_path,
        f"""
        assert open({granted!r}).read() == "granted"
        assert refused(open, {str(outside / "secret.txt")!r})
        with open("/dev/null", "w") as f:
            f.write("discarded")
    """,
        read=read,
    )


def test_tcp_connections_are_refused(tmp_path):
    needs_abi(4)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        run_restricted(
            tmp_path,
            f"""
            assert refused(socket.create_connection, ("127.0.0.1", {port}), 5)
        """,
        )
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()


def test_the_guard_cannot_be_signalled(tmp_path):
    needs_abi(6)
    run_restricted(
        tmp_path,
        """
        assert refused(os.kill, os.getppid(), 0)
    """,
    )


def test_abstract_unix_sockets_outside_the_domain_are_unreachable(tmp_path):
    needs_abi(6)
    name = f"\0kernelkiln-landlock-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(name)
        listener.listen()
        run_restricted(
            tmp_path,
            f"""
            with socket.socket(socket.AF_UNIX) as client:
                assert refused(client.connect, {name!r})
        """,
        )


def test_other_processes_environment_cannot_be_read(tmp_path):
    needs_abi(1)
    # CAP_SYS_ADMIN or CAP_PERFMON lets root read it despite Landlock (seen on Linux 6.18);
    # workers hold no capabilities, so this child gives them up first.
    run_restricted(
        tmp_path,
        f"""
        import ctypes
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        assert ctypes.CDLL(None).capset(header, (ctypes.c_uint32 * 6)()) == 0
        assert open("/proc/self/status").read().startswith("Name:")  # /proc itself is readable
        assert refused(open, "/proc/{os.getpid()}/environ", "rb")
    """,
    )


def test_programs_under_the_read_paths_still_run(tmp_path):
    needs_abi(1)
    run_restricted(
        tmp_path,
        """
        subprocess.run(["/bin/true"], check=True)
    """,
    )
