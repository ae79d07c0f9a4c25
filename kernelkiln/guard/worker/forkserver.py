"""A fork-server with torch preloaded: workers start in milliseconds, forked from a
process that was started with a secret-free environment and never imports the
caller's ``__main__``.

The parent talks to the server over a socket pair: pickled requests go in (the server
trusts its parent), JSON replies come out. Each worker gets one end of its own socket
pair, passed over the control socket as a file descriptor.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from kernelkiln.guard.worker import sandbox

_HEADER = struct.Struct("!I")


def _send(sock: socket.socket, payload: bytes, fds: list[int] | None = None) -> None:
    data = _HEADER.pack(len(payload)) + payload
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.sendall(data)


def _recv(sock: socket.socket) -> tuple[bytes, list[int]]:
    data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 4)
    if not data:
        raise EOFError("fork-server connection closed")
    while len(data) < _HEADER.size or len(data) < _HEADER.size + _HEADER.unpack_from(data)[0]:
        more = sock.recv(1 << 16)
        if not more:
            raise EOFError("fork-server connection closed")
        data += more
    return data[_HEADER.size :], list(fds)


class ForkServer:
    """Client side: starts the server and asks it for workers."""

    def __init__(self, platform: str = "cpu") -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.process = subprocess.Popen(
            [sys.executable, "-c", f"from kernelkiln.guard.worker.forkserver import serve; serve({theirs.fileno()})"],
            pass_fds=[theirs.fileno()],
            env=sandbox.scrubbed_env(sandbox.platform_env(platform)),
            stdin=subprocess.DEVNULL,
            start_new_session=False,
            close_fds=True,
        )
        theirs.close()
        self.sock = ours
        self.lock = threading.Lock()
        self._call({"op": "ping"})

    def _call(self, request: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        with self.lock:
            _send(self.sock, pickle.dumps(request), fds)
            payload, _ = _recv(self.sock)
        reply: dict[str, Any] = json.loads(payload)
        return reply

    def alive(self) -> bool:
        return self.process.poll() is None

    def start(self, spec: sandbox.SandboxSpec, init: dict[str, Any]) -> tuple[int, Connection]:
        """Fork a worker running the harness; returns its pid and the parent's end of its channel."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            reply = self._call({"op": "fork", "spec": spec, "init": init}, [theirs.fileno()])
        finally:
            theirs.close()
        if "pid" not in reply:
            ours.close()
            raise OSError(f"the worker could not isolate itself: {reply.get('error')}")
        return int(reply["pid"]), Connection(ours.detach())

    def exit_code(self, pid: int, timeout: float = 2.0) -> int | None:
        """The worker's exit code (negative: killed by that signal), or None while it runs."""
        deadline = time.monotonic() + timeout
        pause = 0.0005  # a killed worker's first process follows it within a millisecond or two
        while True:
            code = self._call({"op": "status", "pid": pid}).get("code")
            if code is not None or time.monotonic() >= deadline:
                return code
            time.sleep(pause)
            pause = min(2 * pause, 0.01)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        if self.process.poll() is None:
            self.process.kill()


_servers: dict[str, ForkServer] = {}
_server_lock = threading.Lock()


def shared(platform: str = "cpu") -> ForkServer:
    """The process-wide fork-server of ``platform``, started on first use and restarted if it died."""
    with _server_lock:
        server = _servers.get(platform)
        if server is None or not server.alive():
            server = _servers[platform] = ForkServer(platform)
        return server


def _preload_triton() -> None:
    """Import Triton once here, if installed: workers may not be able to read the Python
    installation to import it themselves (it can sit in a directory only the guard's user
    reads), and Triton's language must be imported with TRITON_INTERPRET already set."""
    with contextlib.suppress(Exception):  # not installed or broken: a Triton candidate's build then says why
        import triton.language

        if os.environ.get("TRITON_INTERPRET") == "1":  # and what the interpreter imports on a first launch
            import triton.compiler.code_generator
            import triton.experimental.gluon
            import triton.language.extra.libdevice
            import triton.runtime.interpreter  # noqa: F401


def _serve(control: socket.socket) -> None:
    gc.disable()
    import torch  # noqa: F401  (preloaded so that forked workers start warm)

    from kernelkiln.guard.worker import harness

    _preload_triton()

    # Objects the workers inherit are never scanned by a worker's garbage collector, so it
    # does not write to (and copy) every inherited page: a fresh worker is fast at once.
    gc.freeze()
    gc.enable()

    codes: dict[int, int] = {}
    waited: dict[int, int] = {}  # worker pid -> the child whose exit is the worker's

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            codes[pid] = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    while True:
        try:
            payload, fds = _recv(control)
        except (EOFError, OSError):
            return  # the parent is gone; workers follow through their parent-death signal
        request = pickle.loads(payload)
        reap()
        if request["op"] == "fork":
            spec, init, channel = request["spec"], request["init"], fds[0]

            def run(report: Any, flags: int) -> None:
                # spawn calls run in the fork, within this iteration: the loop's names are still this request's
                harness.main(Connection(channel), spec, init, report, flags)  # noqa: B023

            first, pid = sandbox.spawn(spec, run, channel, [control.fileno()])
            for fd in fds:
                os.close(fd)
            if isinstance(pid, int):
                waited[pid] = first
                reply: dict[str, Any] = {"pid": pid}
            else:
                reply = {"error": pid}
        elif request["op"] == "status":
            pid = int(request["pid"])
            reply = {"code": codes.get(waited.get(pid, pid))}
        else:
            reply = {"ok": True}
        _send(control, json.dumps(reply).encode())


def serve(fd: int) -> None:
    """Entry point of the fork-server process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _serve(socket.socket(fileno=fd))
    os._exit(0)  # nothing to flush; skips extension modules' noisy teardown (Triton's leak reports)
