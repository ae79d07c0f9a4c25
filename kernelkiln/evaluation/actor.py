"""An evaluation actor: one device of a cluster, judging candidates with the guard.

The class is plain Python: ``ray_pool.py`` wraps it with ``ray.remote`` (so
nothing here imports Ray) and places one per device: a GPU (``num_gpus=1``; Ray sets
``CUDA_VISIBLE_DEVICES``) or, on a CPU node, a set of cores of its own, which the actor
pins every one of its threads to before its first session starts (the guard's workers and
timing thread inherit the mask, as they do locally).

What crosses the wire is data: a ``TaskShipment`` (``shipment.py``: the task file's text, so
nodes need no shared filesystem), the guard's settings as JSON, the candidate's code; back
comes the Verdict as JSON. The actor never sees the store's URL or a model's key, and removes any
secret it inherited from the node that started it.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from kernelkiln import native
from kernelkiln.evaluation.shipment import TaskShipment
from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.session import GuardSession

_SESSIONS_KEPT = 4  # warm sessions (a reference worker each) per actor, least recently used closed first
# Variables a node's environment may hold that an evaluation has no business with: model keys,
# cloud credentials, database URLs and passwords. The guard's workers get an allow-list anyway.
SECRET = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)|^KILN_STORE$|^DATABASE_URL$", re.I)


def secret_names(environ: dict[str, str] | os._Environ) -> list[str]:
    """The names in ``environ`` that look like secrets (never their values). Ray's own (RAY_AUTH_MODE,
    its cluster token) are left alone: an actor is a Ray process and needs them to reach its cluster."""
    return sorted(name for name in environ if SECRET.search(name) and not name.startswith("RAY_"))


class DeviceInfo(BaseModel):
    """What an actor reports about its device; ``kind`` decides which results may be compared."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str  # e.g. "cpu: AMD EPYC 9B14, 4 cores" or "cuda: NVIDIA H200"
    node: str  # the Ray node id (or host name) it runs on
    host: str
    index: int  # its index among the node's devices
    cores: list[int] = []  # the CPU cores it owns (CPU nodes), else []

    @property
    def name(self) -> str:
        return f"{self.host}/{self.node[:8]}#{self.index}"


def own_cores(index: int, per_device: int) -> list[int]:
    """Cores ``[index·per_device, (index+1)·per_device)`` of this process's mask, pinned for every thread."""
    available = sorted(os.sched_getaffinity(0))
    cores = available[index * per_device : (index + 1) * per_device]
    if len(cores) < per_device:
        raise RuntimeError(f"device {index} needs {per_device} core(s); this node has {len(available)}")
    for tid in os.listdir("/proc/self/task"):  # a Linux mask is per thread; Ray's own threads run already
        try:
            os.sched_setaffinity(int(tid), cores)
        except OSError:
            pass  # a thread that ended meanwhile
    return cores


class EvaluationActor:
    """Judges candidates on one device; keeps a warm GuardSession per recent task."""

    def __init__(self, platform: str, index: int, cores_per_device: int | None, node: str) -> None:
        for name in secret_names(os.environ):
            del os.environ[name]
        self.platform = platform
        self.cores = own_cores(index, cores_per_device) if platform == "cpu" and cores_per_device else []
        self.info = DeviceInfo(
            kind=_kind(platform, len(self.cores) or len(os.sched_getaffinity(0))),
            node=node,
            host=socket.gethostname(),
            index=index,
            cores=self.cores,
        )
        self.workdir = Path(tempfile.mkdtemp(prefix="kiln-actor-"))
        self.sessions: OrderedDict[tuple[str, str], GuardSession] = OrderedDict()

    def describe(self) -> dict[str, Any]:
        return self.info.model_dump()

    def evaluate(
        self,
        shipment: TaskShipment,
        guard: dict[str, Any],
        code: str,
        incumbent: str | None = None,
        timed: bool = True,
        time_budget_s: float | None = None,
    ) -> dict[str, Any]:
        """The Verdict on ``code`` (as JSON), judged by this device's session for the task."""
        verdict = self._session(shipment, guard).evaluate(code, incumbent, timed=timed, time_budget_s=time_budget_s)
        return verdict.model_copy(update={"device": self.info.name}).model_dump(mode="json")

    def native_requests(self, shipment: TaskShipment, guard: dict[str, Any], code: str) -> list[dict[str, Any]]:
        """The native builds ``code`` asks for (a diagnostic tool's first step)."""
        return [r.to_dict() for r in self._session(shipment, guard).native_requests(code)]

    def build_as_sandbox(
        self, shipment: TaskShipment, guard: dict[str, Any], request: dict[str, Any]
    ) -> dict[str, Any]:
        """``request`` compiled as candidate builds are (a diagnostic tool's second step)."""
        built = self._session(shipment, guard).build_as_sandbox(native.BuildRequest.from_dict(request))
        return built.to_dict()

    def close(self) -> None:
        while self.sessions:
            _, session = self.sessions.popitem(last=False)
            session.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _session(self, shipment: TaskShipment, guard: dict[str, Any]) -> GuardSession:
        config = GuardConfig.model_validate(guard)
        if self.cores and config.threads is None:  # all of the device's cores but one, as locally
            config = config.model_copy(update={"threads": max(1, len(self.cores) - 1)})
        key = (shipment.key, config.model_dump_json())
        if key in self.sessions:
            self.sessions.move_to_end(key)
            return self.sessions[key]
        session = GuardSession(shipment.load(self.workdir / shipment.key), config)
        self.sessions[key] = session
        while len(self.sessions) > _SESSIONS_KEPT:
            _, old = self.sessions.popitem(last=False)
            old.close()
        return session


def _kind(platform: str, cores: int) -> str:
    if platform == "cuda":
        import torch

        return f"cuda: {torch.cuda.get_device_name(0)}"
    from kernelkiln.platforms.host import cpu_flags
    from kernelkiln.platforms.machine import cpu_name

    isa = "avx512f" if "avx512f" in cpu_flags() else "avx2" if "avx2" in cpu_flags() else "no avx2"
    return f"cpu: {cpu_name()}, {isa}, {cores} core(s)"
