"""Worker processes: forked from a torch-preloaded fork-server, isolated, killed as a group."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.measurement import accounting
from kernelkiln.guard.verdict import Isolation
from kernelkiln.guard.worker import forkserver, processes, protocol, sandbox
from kernelkiln.isolation.supervisor import Supervisor
from kernelkiln.platforms.host import usable_cores

SPIN_S = 0.05  # longest busy-wait for a reply before sleeping


class WorkerFailure(Exception):
    """A worker died, timed out, or broke the protocol; ``reason`` says how."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Worker:
    """One isolated worker running the reference or a candidate."""

    def __init__(
        self,
        slot: int,
        task_path: str,
        overrides: dict[str, Any],
        model_seed: int,
        config: GuardConfig,
        threads: int,
        cpus: list[int] | None = None,
    ):
        self.config = config
        self.spin_s = SPIN_S if threads < usable_cores() else 0.0
        self.uid = sandbox.allocate_uid(slot) if (config.isolate_user and sandbox.can_switch_user()) else None
        if self.uid is not None:
            processes.kill_user(self.uid)  # leftovers of an earlier worker in this slot
        self.workspace = sandbox.make_workspace(self.uid)
        conf = sandbox.confinement(
            str(self.workspace),
            [task_path],
            gpu=config.platform != "cpu",
            network=config.isolate_network,
            filesystem=config.isolate_filesystem,
            uid=self.uid,
        )
        spec = sandbox.SandboxSpec(
            confinement=conf,
            memory_limit_mb=config.memory_limit_mb,
            file_size_limit_mb=config.file_size_limit_mb,
            max_tasks=config.max_tasks,
            env=sandbox.scrubbed_env(sandbox.platform_env(config.platform)),
            limit_address_space=config.platform == "cpu",
            cpus=cpus,
        )
        init = {
            "task_path": task_path,
            "overrides": overrides,
            "model_seed": model_seed,
            "threads": threads,
            "platform": config.platform,
        }
        self.server = forkserver.shared(config.platform)
        try:
            self.pid, self.conn = self.server.start(spec, init)
        except OSError as exc:
            sandbox.remove_workspace(self.workspace)
            raise WorkerFailure(str(exc)) from None
        self.frozen = False
        self.closed = False
        self.supervisor: Supervisor | None = None
        try:
            listener = sandbox.take_listener(self.conn, config.build_timeout_s)
        except (EOFError, OSError) as exc:
            self.close()
            raise WorkerFailure(f"{self.death_cause()} while isolating itself") from exc
        if listener is not None:
            self.supervisor = Supervisor(listener)
        hello = self.request(None, timeout=config.build_timeout_s)
        if not hello.get("ok"):
            self.close()
            raise WorkerFailure(f"worker could not load the task: {hello.get('error')}")
        # Sent before any candidate code ran: what the worker says here is trusted.
        self.isolation: dict[str, bool] = {k: bool(v) for k, v in dict(hello.get("isolation", {})).items()}
        self.isolation_notes: dict[str, str] = {k: str(v) for k, v in dict(hello.get("notes", {})).items()}
        self.build_isolation: dict[str, bool] = {}  # layers that held around every compiler run it asked for
        self.build_notes: dict[str, str] = {}

    def record_build(self, held: dict[str, bool], notes: dict[str, str]) -> None:
        """Fold one native build's isolation into ``build_isolation`` (a layer holds only if it held every time)."""
        for layer, ok in held.items():
            self.build_isolation[layer] = self.build_isolation.get(layer, True) and ok
        self.build_notes.update(notes)

    def request(
        self,
        message: dict[str, Any] | None,
        timeout: float,
        serve: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Send ``message`` (None: just read) and wait for the reply, serving compile requests.

        ``timeout`` is the worker's own time: time the parent spends serving its compiles (each
        under its own limit) does not count against it, up to ``timeout`` of it in all, so a
        request never takes more than twice ``timeout``.
        """
        deadline = time.monotonic() + timeout
        credit = timeout  # compile time still to be given back
        try:
            if message is not None:
                protocol.send(self.conn, message)
            while True:
                if not self._wait(deadline):
                    raise WorkerFailure(f"timed out after {timeout:g}s")
                reply = protocol.recv(self.conn)
                if reply.get("op") == "compile" and serve is not None:
                    # A compile has its own limit; the worker's clock stops while the parent serves it.
                    started = time.monotonic()
                    protocol.send(self.conn, serve(reply))
                    given = min(credit, time.monotonic() - started)
                    deadline, credit = deadline + given, credit - given
                    continue
                if reply.get("op") is not None:
                    raise protocol.ProtocolError(f"unexpected request {reply.get('op')!r}")
                return reply
        except (EOFError, BrokenPipeError, ConnectionResetError):
            raise WorkerFailure(self.death_cause()) from None
        except protocol.ProtocolError as exc:
            raise WorkerFailure(f"protocol violation: {exc}") from None

    def _wait(self, deadline: float) -> bool:
        # Sleeping in poll() costs a wake-up of up to a millisecond on a virtual machine, with
        # as much jitter; spinning briefly keeps a request's own cost small and steady. Only
        # done when the workers leave a core free, or the parent would slow the worker down.
        if self.spin_s:
            end = min(deadline, time.monotonic() + self.spin_s)
            while time.monotonic() < end:
                if self.conn.poll(0):
                    return True
        left = deadline - time.monotonic()
        return left > 0 and self.conn.poll(left)

    def death_cause(self) -> str:
        code = self.server.exit_code(self.pid)
        if code is None:
            return "worker stopped answering"
        if code < 0:
            name = signal.Signals(-code).name
            hint = {
                "SIGSEGV": " (segmentation fault)",
                "SIGKILL": " (killed: out of memory or a limit)",
                "SIGBUS": " (bus error)",
                "SIGABRT": " (aborted)",
                "SIGFPE": " (arithmetic fault)",
            }.get(name, "")
            return f"worker crashed with {name}{hint}"
        return f"worker exited with code {code}"

    def share(self, path: str) -> str:
        """Copy a trusted file into the workspace (read-only to the worker); its path as the worker sees it."""
        target = self.workspace / Path(path).name
        shutil.copyfile(path, target)
        os.chmod(target, 0o444)
        inner = Path("/tmp") if self.isolation.get("filesystem") else self.workspace
        return str(inner / target.name)

    def freeze(self) -> None:
        """Stop every thread of the worker's process group (while another worker is timed)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGSTOP)
            self.frozen = True

    def thaw(self) -> None:
        if self.frozen:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGCONT)
            self.frozen = False

    def stray_processes(self) -> list[int]:
        """Processes the worker started (of its user id too, when it has one of its own)."""
        found = set(processes.started_by(self.pid))
        if self.uid is not None:
            found.update(processes.pids_of_user(self.uid))
        found.discard(self.pid)
        return sorted(found)

    def background_work(self, probe_s: float, cpu_max: float) -> str:
        """Why the worker is not idle between requests (``""``: it is): processes it left behind, or more than
        ``cpu_max`` of a core used over ``probe_s`` seconds of waiting (background threads)."""
        stray = self.stray_processes()
        if stray:
            return f"the candidate started {len(stray)} background process(es)"
        before = self.cpu_seconds()
        time.sleep(probe_s)
        after = self.cpu_seconds()
        if before is not None and after is not None and (after - before) > cpu_max * probe_s:
            share = (after - before) / probe_s
            return f"the candidate keeps computing while idle ({share:.0%} of a core): background threads"
        return ""

    def denied(self) -> list[str]:
        """System calls the sandbox refused this worker so far (e.g. ``socket(AF_INET)``)."""
        return self.supervisor.denied() if self.supervisor is not None else []

    def isolation_record(self, policy: str) -> Isolation:
        """What held around this worker and its builds under ``policy``, and why a layer did not."""
        notes = {
            **{layer: why for layer, why in self.build_notes.items() if not self.build_isolation.get(layer)},
            **self.isolation_notes,
        }
        return Isolation(
            policy=policy, held=self.isolation, build=self.build_isolation, notes=notes, denied=self.denied()
        )

    def exited(self) -> bool:
        return self.server.exit_code(self.pid, timeout=0) is not None

    def cpu_seconds(self) -> float | None:
        return accounting.cpu_seconds(self.pid)

    def close(self) -> None:
        """Kill the worker, everything it started, and its workspace (idempotent)."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(Exception):
            protocol.send(self.conn, {"op": "exit"})
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.server.exit_code(self.pid, timeout=5)
        if self.uid is not None:
            processes.kill_user(self.uid)
        if self.supervisor is not None:
            self.supervisor.close()
        self.conn.close()
        sandbox.remove_workspace(self.workspace)
