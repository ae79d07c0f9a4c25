"""The worker side of the guard: runs the reference or a candidate on request.

Everything here runs inside an isolated worker and is untrusted by the parent: the
parent re-checks outputs itself and times each request with its own clock.
"""

from __future__ import annotations

import linecache
import os
import sys
import time
import traceback
import types
from multiprocessing.connection import Connection
from typing import Any

import torch

from kernelkiln import native
from kernelkiln.guard.reference_ops import ops_of
from kernelkiln.guard.worker import protocol, sandbox
from kernelkiln.isolation.layers import Report
from kernelkiln.native import BuildRequest, BuildResult
from kernelkiln.platforms import get_platform
from kernelkiln.task import Task, load_task
from kernelkiln.task.calls import CallRecorder


class _RemoteBuilder:
    """Sends native build requests to the trusted parent instead of compiling here."""

    def __init__(self, conn: Connection):
        self.conn = conn

    def __call__(self, request: BuildRequest) -> BuildResult:
        protocol.send(self.conn, {"op": "compile", "request": request.to_dict()})
        reply = protocol.recv(self.conn)
        return BuildResult.from_dict(reply["result"])


def _serve_load_inline() -> None:
    """torch.utils.cpp_extension, in this worker, is kernelkiln's load_inline alone (the one name the gate lets
    through), which builds through the parent as every native build does; torch's own module, which would
    compile here and takes 0.14 s to import, never loads."""
    shim = types.ModuleType("torch.utils.cpp_extension", "torch's load_inline, built by kernelkiln's guard")
    shim.load_inline = native.load_inline  # type: ignore[attr-defined]
    sys.modules["torch.utils.cpp_extension"] = shim
    torch.utils.cpp_extension = shim


def _as_outputs(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _place(values: list[Any], device: str) -> list[Any]:
    """Inputs on the platform's device (untouched on CPU)."""
    return values if device == "cpu" else [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def _host(t: torch.Tensor) -> torch.Tensor:
    """``t`` on the host: itself on CPU, a copy from a device (what the guard compares)."""
    return t if t.device.type == "cpu" else t.cpu()


def _interpreted_kernels() -> int | None:
    """Triton kernels run so far under Triton's interpreter in this process (None: cannot tell)."""
    interpreter = sys.modules.get("triton.runtime.interpreter")
    cache = getattr(getattr(interpreter, "InterpretedFunction", None), "rewritten_fn", None)
    return len(cache) if isinstance(cache, dict) else None


def _overlaps(out: torch.Tensor, inputs: list[Any]) -> bool:
    if out.numel() == 0:
        return False
    start = out.untyped_storage().data_ptr()
    end = start + out.untyped_storage().nbytes()
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.numel():
            s = x.untyped_storage().data_ptr()
            if s < end and start < s + x.untyped_storage().nbytes():
                return True
    return False


class Harness:
    """State of one worker: the task, the module under test, and its input sets."""

    def __init__(self, conn: Connection, init: dict[str, Any]):
        self.conn = conn
        # The parent inferred the family; the worker needs no seed.
        self.task: Task = load_task(init["task_path"], init["overrides"], analyze=False, starts=False)
        self.model_seed = int(init["model_seed"])
        self.cls: type | None = None  # None: the reference, each workload's own Model (its module's sizes)
        self.platform = get_platform(init.get("platform", "cpu"))
        self.device = self.platform.device
        self.interpret = os.environ.get("TRITON_INTERPRET") == "1"  # read before any candidate code runs
        self.interpreted_before = _interpreted_kernels() or 0
        self.uses_triton = False
        self.models: dict[int, torch.nn.Module] = {}
        self.sets: dict[int, list[list[Any]]] = {}
        self.last_output: list[Any] | None = None

    # -- build -------------------------------------------------------------------------
    def build(self, source: str | None) -> dict[str, Any]:
        if source is not None:
            native.set_builder(_RemoteBuilder(self.conn))
            if "cpp_extension" in source:
                _serve_load_inline()
            namespace: dict[str, Any] = {"__name__": "kiln_candidate", "__file__": "candidate.py"}
            # Triton reads a kernel's source through inspect (linecache), never from a file.
            linecache.cache["candidate.py"] = (len(source), None, source.splitlines(True), "candidate.py")
            exec(compile(source, "candidate.py", "exec"), namespace)
            self.cls = namespace.get("ModelNew")
            if not isinstance(self.cls, type):
                raise TypeError("candidate defines no class ModelNew")
            self.uses_triton = any(
                (v.__name__ if isinstance(v, types.ModuleType) else type(v).__module__).split(".")[0] == "triton"
                for v in namespace.values()
            )
        with torch.no_grad():
            for i, workload in enumerate(self.task.workloads):
                model = self.task.make_model(workload, self.model_seed, self.cls)
                self.models[i] = model if self.device == "cpu" else model.to(self.device)
        return {"ok": True}

    def interpreted(self) -> bool:
        """Whether the candidate ran Triton kernels under Triton's interpreter: correct or not, untimeable."""
        if not self.interpret:
            return False
        ran = _interpreted_kernels()
        return self.uses_triton if ran is None else ran > self.interpreted_before

    # -- check -------------------------------------------------------------------------
    def check(self, workload: int, seeds: list[int], wide: list[bool] | None = None) -> dict[str, Any]:
        """Run the candidate on each seed's inputs; ``wide`` marks the robustness trials (wider inputs)."""
        model, w = self.models[workload], self.task.workloads[workload]
        wide = wide or [False] * len(seeds)
        buffers: list[Any] | None = None
        trials = []
        for k, (seed, widen) in enumerate(zip(seeds, wide, strict=False)):
            fresh = _place(self.task.make_inputs(w, seed, widen), self.device)
            if buffers is None:
                buffers = fresh
            else:  # same addresses, new contents: a cache keyed by address returns stale data
                for b, f in zip(buffers, fresh, strict=False):
                    if isinstance(b, torch.Tensor):
                        b.copy_(f)
            recorder = CallRecorder() if k == 0 else None
            # torch's global generator as make_inputs left it, where the parent ran the reference: a forward that
            # draws at random draws what the reference drew, on the run that agrees with itself too
            drawing = torch.get_rng_state()
            with torch.no_grad():
                if recorder is not None:
                    with recorder:
                        raw = model(*buffers)
                else:
                    raw = model(*buffers)
            outs = _as_outputs(raw)
            types = [type(o).__module__ + "." + type(o).__qualname__ for o in outs]
            aliased = any(isinstance(o, torch.Tensor) and _overlaps(o, buffers) for o in outs)
            plain = [o if type(o) is torch.Tensor else None for o in outs]
            inputs_after = [b.clone() if isinstance(b, torch.Tensor) else None for b in buffers]
            again: list[Any] = []
            if not widen:  # agreeing with itself is checked on the task's inputs; a robustness trial costs one run
                # a number among the inputs is passed again as it was (inputs_after holds only tensors)
                copies = [a.clone() if a is not None else b for a, b in zip(inputs_after, buffers, strict=True)]
                torch.set_rng_state(drawing)
                with torch.no_grad():
                    again = [o if type(o) is torch.Tensor else None for o in _as_outputs(model(*copies))]
            trials.append(
                {
                    "outputs": [_host(p.clone()) if p is not None else None for p in plain],
                    "again": [_host(a) if a is not None else None for a in again],
                    "types": types,
                    "aliased": aliased,
                    "inputs_after": [_host(b) if b is not None else None for b in inputs_after],
                    "ops": sorted(ops_of(recorder.calls)) if recorder is not None else [],
                }
            )
        return {"ok": True, "trials": trials, "interpreted": self.interpreted()}

    # -- timing ------------------------------------------------------------------------
    def prepare(self, workload: int, count: int, seed: int) -> dict[str, Any]:
        self.sets[workload] = [
            _place(self.task.make_inputs(self.task.workloads[workload], seed + i), self.device) for i in range(count)
        ]
        return {"ok": True}

    def refresh(self, workload: int, index: int, seed: int) -> dict[str, Any]:
        fresh = self.task.make_inputs(self.task.workloads[workload], seed)
        for b, f in zip(self.sets[workload][index], fresh, strict=False):
            if isinstance(b, torch.Tensor):
                b.copy_(f)
        return {"ok": True}

    def run(self, workload: int, reps: int, last: int | None) -> dict[str, Any]:
        model, sets = self.models[workload], self.sets[workload]
        order = [i % len(sets) for i in range(reps)]
        if last is not None:
            order[-1] = last
        out = None
        with torch.no_grad():
            start = time.perf_counter()
            for i in order:
                out = model(*sets[i])
            self.platform.synchronize()  # device-wide: work queued on side streams is counted too
            elapsed = time.perf_counter() - start
        self.last_output = _as_outputs(out)
        return {"ok": True, "elapsed_s": elapsed}

    def fetch(self) -> dict[str, Any]:
        outs = [_host(o) if type(o) is torch.Tensor else None for o in (self.last_output or [])]
        return {"ok": True, "outputs": outs}


def main(conn: Connection, spec: sandbox.SandboxSpec, init: dict[str, Any], report: Report, flags: int) -> None:
    """Worker entry point (runs in the forked child, after ``sandbox.spawn``'s namespaces)."""
    try:
        sandbox.enter(spec, report, flags)
    except BaseException as exc:  # the guard learns why, not just that the worker died
        sandbox.hand_over_listener(conn, None)
        protocol.send(conn, {"ok": False, "error": f"isolation failed: {type(exc).__name__}: {exc}"})
        return
    sandbox.hand_over_listener(conn, report.listener)
    torch.set_num_threads(int(init["threads"]))
    torch.ones(1 << 16).sum()  # start the intra-op pool before any candidate code runs
    try:
        harness = Harness(conn, init)
    except BaseException as exc:  # the task itself is broken: tell the parent, not a traceback
        protocol.send(conn, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    protocol.send(conn, {"ok": True, "isolation": report.held, "notes": report.notes})
    while True:
        try:
            # Blocks between requests (no busy-wait): off the CPU, the kernel's accounting of the
            # worker is exact when the guard reads it (see kernelkiln.guard.measurement.accounting.settle).
            msg = protocol.recv(conn)
        except (EOFError, OSError):
            return
        op = msg.get("op")
        if op == "exit":
            return
        try:
            if op == "build":
                reply = harness.build(msg.get("source"))
            elif op == "check":
                reply = harness.check(msg["workload"], msg["seeds"], msg.get("wide"))
            elif op == "prepare":
                reply = harness.prepare(msg["workload"], msg["count"], msg["seed"])
            elif op == "refresh":
                reply = harness.refresh(msg["workload"], msg["index"], msg["seed"])
            elif op == "run":
                reply = harness.run(msg["workload"], msg["reps"], msg.get("last"))
            elif op == "fetch":
                reply = harness.fetch()
            elif op == "nop":
                reply = {"ok": True}
            else:
                reply = {"ok": False, "error": f"unknown op {op!r}"}
        except native.BuildError as exc:
            reply = {"ok": False, "error": str(exc), "build_error": True}
        except BaseException as exc:
            tb = traceback.extract_tb(exc.__traceback__)
            where = next((f"line {f.lineno}" for f in reversed(tb) if f.filename == "candidate.py"), None)
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000], "where": where}
        protocol.send(conn, reply)
