"""A worker's request deadline: the worker's own time, not the parent's compiles on its behalf."""

from __future__ import annotations

import threading
import time
import types
from multiprocessing import Pipe

import pytest

from kernelkiln.guard.worker import protocol
from kernelkiln.guard.worker.workers import Worker, WorkerFailure


def _fake_worker(conn) -> types.SimpleNamespace:
    fake = types.SimpleNamespace(conn=conn, spin_s=0.0)
    fake._wait = lambda deadline: Worker._wait(fake, deadline)
    return fake


def _worker_side(conn, then_s: float) -> None:
    """Asks for one compile, waits for the answer, then works ``then_s`` before replying."""
    protocol.recv(conn)  # the load request
    protocol.send(conn, {"op": "compile", "request": {}})
    protocol.recv(conn)
    time.sleep(then_s)
    protocol.send(conn, {"ok": True})


def _serve_slowly(message):
    time.sleep(2.5)  # a compile: longer than the worker's whole limit below
    return {"result": {}}


def test_time_the_parent_spends_compiling_does_not_count_against_the_worker():
    parent, child = Pipe()
    side = threading.Thread(target=_worker_side, args=(child, 0.05))
    side.start()
    reply = Worker.request(_fake_worker(parent), {"op": "build"}, 2.0, serve=_serve_slowly)
    side.join()
    assert reply == {"ok": True}


def test_the_worker_still_times_out_on_its_own_time():
    parent, child = Pipe()
    side = threading.Thread(target=_worker_side, args=(child, 5.0), daemon=True)
    side.start()
    with pytest.raises(WorkerFailure, match="timed out"):
        Worker.request(_fake_worker(parent), {"op": "build"}, 2.0, serve=_serve_slowly)


def test_compile_time_is_given_back_only_up_to_the_limit_itself():
    parent, child = Pipe()
    side = threading.Thread(target=_worker_side, args=(child, 2.0), daemon=True)
    side.start()
    # 2.5 s of compiling is given back as 2: the worker's 2 s after it then pass the deadline.
    with pytest.raises(WorkerFailure, match="timed out"):
        Worker.request(_fake_worker(parent), {"op": "build"}, 2.0, serve=_serve_slowly)
