"""A real Ray cluster on this machine, for the cluster tests: a head on 127.0.0.1 and worker nodes.

Each node is a ``ray start --block`` process in a process group of its own, so a test can
kill one node outright (SIGKILL to the group: its raylet and object store die at once, as
when a machine fails) and the rest keep running. Every node starts with a fake model key
in its environment, as a user's shell would give it, so the tests see whether that key
reaches an evaluation actor.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from kernelkiln.evaluation.actor import EvaluationActor, secret_names

FAKE_KEY = ("OPENAI_API_KEY", "sk-kiln-test-fixture-not-a-key")
# Ray 2.60 turns token auth on once ~/.ray/auth_token exists (any local `ray.init()` writes one): the
# test cluster says what it wants rather than depend on the home directory. AUTH_OFF is for its drivers too.
AUTH_OFF = ("RAY_AUTH_MODE", "disabled")
# Failure detection in seconds rather than Ray's default of about half a minute.
_FAST_HEALTH = {
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "4",
    "RAY_health_check_initial_delay_ms": "1000",
}
_ACTIVE = re.compile(r"^\s*\d+\s+node_[0-9a-f]+", re.M)


def _ray() -> str:
    return str(Path(sys.executable).with_name("ray"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class LocalCluster:
    """Nodes of one Ray cluster, each a process group this object owns."""

    def __init__(self, cpus_per_node: int = 1) -> None:
        self.cpus = cpus_per_node
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.client_port = _free_port()
        self.client_address = f"ray://127.0.0.1:{self.client_port}"  # Ray Client's server on the head
        self.temp = Path(tempfile.mkdtemp(prefix="kr-", dir="/tmp"))  # short: Ray's socket paths live under it
        self.env = {**os.environ, **_FAST_HEALTH, FAKE_KEY[0]: FAKE_KEY[1], AUTH_OFF[0]: AUTH_OFF[1]}
        self.env.pop("RAY_ADDRESS", None)
        self.nodes: list[subprocess.Popen[bytes]] = []

    def start(self, nodes: int = 2) -> LocalCluster:
        self._spawn(
            [
                "--head",
                f"--port={self.port}",
                f"--ray-client-server-port={self.client_port}",
                "--include-dashboard=false",
                f"--temp-dir={self.temp}",
            ]
        )
        self.wait_for(1)
        for _ in range(nodes - 1):
            self.add_node()
        return self

    def add_node(self) -> subprocess.Popen[bytes]:
        """Another worker node; returns its process (kill it with ``kill``)."""
        self._spawn([f"--address={self.address}"])
        self.wait_for(len(self.nodes))
        return self.nodes[-1]

    def kill(self, node: subprocess.Popen[bytes]) -> None:
        """The node dies at once: SIGKILL to its whole process group."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(node.pid, signal.SIGKILL)
        node.wait(10)

    def alive(self) -> int:
        """Nodes the cluster counts as active (``ray status``)."""
        out = subprocess.run(
            [_ray(), "status", f"--address={self.address}"], capture_output=True, text=True, env=self.env, timeout=60
        )
        if out.returncode != 0:
            return 0
        active = out.stdout.split("Active:", 1)[-1].split("Pending:", 1)[0]
        return len(_ACTIVE.findall(active))

    def wait_for(self, nodes: int, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while self.alive() != nodes:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the local Ray cluster did not reach {nodes} node(s) in {timeout:.0f} s")
            time.sleep(0.5)

    def stop(self) -> None:
        for node in reversed(self.nodes):  # a test cluster holds nothing worth a graceful stop
            self.kill(node)
        self._kill_strays()
        shutil.rmtree(self.temp, ignore_errors=True)

    def _spawn(self, args: list[str]) -> None:
        command = [
            _ray(),
            "start",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--num-cpus={self.cpus}",
            "--disable-usage-stats",
            *args,
        ]
        self.nodes.append(
            subprocess.Popen(
                command,
                env=self.env,
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )

    def _kill_strays(self) -> None:
        """Ray's worker processes run in groups of their own; those of this cluster name its temp dir."""
        mark = str(self.temp).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if mark in (entry / "cmdline").read_bytes():
                    os.kill(int(entry.name), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                continue


@contextlib.contextmanager
def local_cluster(nodes: int = 2, cpus_per_node: int = 1) -> Iterator[LocalCluster]:
    cluster = LocalCluster(cpus_per_node)
    try:
        yield cluster.start(nodes)
    finally:
        cluster.stop()


class EnvironmentProbe(EvaluationActor):
    """An evaluation actor that also says which secrets its process holds, now and as it was started."""

    def secrets_now(self) -> dict[str, str]:
        return {name: os.environ[name] for name in secret_names(os.environ)}

    def secrets_at_start(self) -> dict[str, str]:
        """The secret-looking variables of /proc/self/environ: what the process was exec'd with."""
        raw = Path("/proc/self/environ").read_bytes().split(b"\0")
        pairs = dict(item.decode(errors="replace").partition("=")[::2] for item in raw if b"=" in item)
        return {name: pairs[name] for name in secret_names(pairs)}
