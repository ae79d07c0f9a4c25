"""The evaluation pool on a Ray cluster: one evaluation actor per device, candidates queued for free ones.

What runs where: the driver (``kiln optimize|bench|ablate``) runs the agents, their model
calls and every store write; each actor (``actor.py``) judges candidates on its
device, builds included. The actors get neither the store's URL nor a model's key.

A cluster's devices may differ (two GPU models, two CPU models): a run is judged on one
kind only, so no speedup measured on one is ranked against another's. That kind is the
most numerous one unless ``cluster.device`` names another, and a resumed run keeps its own.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, ObjectLostError, RayActorError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from kernelkiln import native
from kernelkiln.errors import UserError
from kernelkiln.evaluation.actor import DeviceInfo, EvaluationActor, secret_names
from kernelkiln.evaluation.config import ClusterConfig
from kernelkiln.evaluation.pool import EvaluationInput
from kernelkiln.evaluation.scheduler import Device, DeviceLost, DeviceQueue, choose_kind
from kernelkiln.evaluation.shipment import TaskShipment
from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.verdict import Verdict
from kernelkiln.task import Task

_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")  # the providers' own variables, set or not on the driver
_START_TIMEOUT_S = 300.0  # actors load torch and start a session's fork-server lazily; creation is quicker


@contextlib.contextmanager
def _without_secrets() -> Iterator[None]:
    """os.environ without secrets while Ray may start a local cluster: its processes inherit it."""
    saved = {name: os.environ.pop(name) for name in secret_names(os.environ)}
    try:
        yield
    finally:
        os.environ.update(saved)


_CLIENT_TRIES = 3


def _messages_to_stderr() -> None:
    """Ray prints its raylets' warnings on the driver's stdout, where `--json` output goes: send them to stderr.

    A private function of the pinned Ray version; without it, they stay on stdout."""
    from ray._private import worker

    printer = getattr(worker, "print_to_stdstream", None)
    if printer is None or getattr(printer, "_kiln", False):
        return

    def to_stderr(data, ignore_prefix):
        printer({**data, "is_err": True}, ignore_prefix)

    setattr(to_stderr, "_kiln", True)  # noqa: B010 - a mark on a function, which mypy does not know
    worker.print_to_stdstream = to_stderr


def connect(address: str) -> None:
    """Join the cluster ``address`` names: ``ray`` (RAY_ADDRESS, else a new local one) or ``ray://HOST:PORT``."""
    if ray.is_initialized():
        return
    _messages_to_stderr()
    # Ray Client's head forks a server per client, and that fork now and then dies before it
    # listens ("Initialization failure from server"); a new handshake gets a new server.
    tries = _CLIENT_TRIES if address.startswith("ray://") else 1
    with _without_secrets():
        for attempt in range(1, tries + 1):
            try:
                ray.init(address=None if address == "ray" else address, log_to_driver=False, configure_logging=False)
                return
            except ConnectionAbortedError as exc:
                if attempt == tries:
                    raise UserError(f"cannot join the Ray cluster at {address}: {_reason(exc)}") from None
                ray.shutdown()
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise UserError(f"cannot join the Ray cluster at {address}: {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    """One line of ``exc``: its first line, or its last where the first only announces a traceback."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return f"{lines[0]} {lines[-1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def alive_nodes() -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n.get("Alive")]


def _result(ref: Any, timeout: float | None = None) -> Any:
    """``ray.get(ref)``: a dead actor or node is ``DeviceLost``; an error the actor raised is re-raised as itself."""
    try:
        return ray.get(ref, timeout=timeout)
    except (RayActorError, ObjectLostError) as exc:
        raise DeviceLost(_first_line(exc)) from None
    except RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, UserError):
            raise UserError(str(cause)) from None
        raise


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


class RayPool:
    """Evaluation actors on every alive node of the cluster ``cluster.address`` names."""

    def __init__(
        self,
        cluster: ClusterConfig,
        platform: str,
        store_url: str,
        device_kind: str | None = None,
        hidden_keys: Sequence[str] = (),
        progress: Callable[[str], None] | None = None,
        actor_class: type = EvaluationActor,
    ):
        """``device_kind``: the kind a resumed run was judged on; ``hidden_keys``: variables (a model's
        key) blanked on the workers besides the providers' own."""
        self.say = progress or (lambda line: None)
        self.platform = platform
        self._actors: list[Any] = []
        connect(cluster.address)
        try:
            self._open(cluster, store_url, device_kind, hidden_keys, actor_class)
        except BaseException:
            self.close()
            raise

    def _open(
        self,
        cluster: ClusterConfig,
        store_url: str,
        device_kind: str | None,
        hidden_keys: Sequence[str],
        actor_class: type,
    ) -> None:
        nodes = alive_nodes()
        if len(nodes) > 1 and store_url.startswith("sqlite"):
            raise UserError(
                f"the Ray cluster has {len(nodes)} nodes and one memory must serve them all: give a "
                f"PostgreSQL store (--store postgresql://…); SQLite is one machine's file"
            )
        actors = self._start(nodes, cluster.cpus_per_device, hidden_keys, actor_class)
        try:
            infos = _result([a.describe.remote() for a in actors], timeout=_START_TIMEOUT_S)
        except (DeviceLost, GetTimeoutError) as exc:
            raise UserError(
                f"the cluster's evaluation actors did not start ({exc}); is kernelkiln installed on every node?"
            ) from None
        described = [DeviceInfo.model_validate(info) for info in infos]
        devices = [Device(name=info.name, kind=info.kind, handle=a) for a, info in zip(actors, described, strict=True)]
        self.device_kind = choose_kind(devices, device_kind or cluster.device)
        unused = [d for d in devices if d.kind != self.device_kind]
        self._kill([d.handle for d in unused])
        used = [d for d in devices if d.kind == self.device_kind]
        self.queue = DeviceQueue(
            used,
            on_lost=lambda d, why: self.say(
                f"cluster: device {d.name} died ({why}); its candidate is evaluated again elsewhere"
            ),
        )
        others = sorted({d.kind for d in unused})
        self.say(
            f"cluster: {len(nodes)} node(s), {len(used)} device(s) of {self.device_kind}"
            + (f" (not used: {', '.join(others)})" if others else "")
        )

    def _start(
        self, nodes: list[dict[str, Any]], per_device: int | None, hidden_keys: Sequence[str], actor_class: type
    ) -> list[Any]:
        remote: Any = ray.remote(actor_class)
        # A worker process starts with its node's environment (whatever `ray start` was given):
        # every key this run knows of is blanked there, before the actor's first line runs.
        hidden = {*secret_names(os.environ), *_KEYS, *hidden_keys}
        blank = {"env_vars": {name: "" for name in sorted(hidden) if name}}
        actors = []
        for node in nodes:
            resources, node_id = node.get("Resources") or {}, node["NodeID"]
            if self.platform == "cuda":
                count, options = int(resources.get("GPU", 0)), {"num_gpus": 1, "num_cpus": 1}
                cores = None
            else:
                cpus = int(resources.get("CPU", 0))
                cores = per_device or cpus
                count, options = (cpus // cores if cores else 0), {"num_cpus": cores}
            strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
            for index in range(count):
                actor = remote.options(
                    max_restarts=0, scheduling_strategy=strategy, runtime_env=blank, **options
                ).remote(self.platform, index, cores, node_id)
                actors.append(actor)
                self._actors.append(actor)
        if not actors:
            what = (
                "GPUs" if self.platform == "cuda" else f"{per_device} CPUs free on one node" if per_device else "CPUs"
            )
            raise UserError(f"the Ray cluster offers no {self.platform} evaluation device (no node has {what})")
        return actors

    def submit(self, inputs: Sequence[EvaluationInput]) -> list[Future[Verdict]]:
        return [self.queue.submit(self._work(item)) for item in inputs]

    def _work(self, item: EvaluationInput) -> Callable[[Device], Verdict]:
        shipment, guard = TaskShipment.of(item.task), item.guard.model_dump(mode="json")

        def work(device: Device) -> Verdict:
            ref = device.handle.evaluate.remote(
                shipment, guard, item.code, item.incumbent, item.timed, item.time_budget_s
            )
            return Verdict.model_validate(_result(ref))

        return work

    def native_requests(self, task: Task, guard: GuardConfig, source: str) -> list[native.BuildRequest]:
        shipment, settings = TaskShipment.of(task), guard.model_dump(mode="json")
        data = self.queue.run(lambda d: _result(d.handle.native_requests.remote(shipment, settings, source)))
        return [native.BuildRequest.from_dict(r) for r in data]

    def build_as_sandbox(self, task: Task, guard: GuardConfig, request: native.BuildRequest) -> native.BuildResult:
        shipment, settings = TaskShipment.of(task), guard.model_dump(mode="json")
        data = self.queue.run(
            lambda d: _result(d.handle.build_as_sandbox.remote(shipment, settings, request.to_dict()))
        )
        return native.BuildResult.from_dict(data)

    def release(self, task: Task) -> None:
        pass  # the actors keep their few warm sessions, least recent closed first

    def tasks_at_once(self, agents: int) -> int:
        return self.queue.tasks_at_once(agents)

    def judgeable(self, task: Task) -> frozenset[str] | None:
        return None

    def measured_start(self, task: Task) -> str | None:
        return None

    def close(self) -> None:
        queue = getattr(self, "queue", None)
        if queue is not None:
            with contextlib.suppress(Exception):
                ray.get([d.handle.close.remote() for d in queue.devices if d.alive], timeout=10)
        self._kill(self._actors)
        with contextlib.suppress(Exception):
            ray.shutdown()

    @staticmethod
    def _kill(handles: list[Any]) -> None:
        for handle in handles:
            with contextlib.suppress(Exception):
                ray.kill(handle)
