"""A candidate's native builds: compiled confined, as the sandbox build user, at most a few per load.

A worker asks for each ``native.load`` its candidate makes; the session compiles it here,
outside the worker, and hands the worker a copy of the library (the cache stays private).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from kernelkiln import native
from kernelkiln.guard.config import GuardConfig
from kernelkiln.guard.worker import sandbox
from kernelkiln.guard.worker.workers import Worker

MAX_COMPILES = 16  # per load of a candidate


def _locate(diagnostic: dict[str, Any], native_source: str, candidate: str | None) -> dict[str, Any]:
    """Add the candidate.py line of a native diagnostic: where the native source is a literal in it, or else
    (a ``load_inline`` main.cpp, put together from several strings) where its line appears once in it."""
    line = diagnostic.get("line")
    if not candidate or not native_source or not line:
        return diagnostic
    at = candidate.find(native_source)
    if at >= 0:
        diagnostic["candidate_line"] = candidate.count("\n", 0, at) + line
        return diagnostic
    lines = native_source.splitlines()
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    matches = [i for i, own in enumerate(candidate.splitlines(), 1) if text and own.strip() == text]
    if len(matches) == 1:
        diagnostic["candidate_line"] = matches[0]
    return diagnostic


class CandidateBuilds:
    """Compiles what a session's workers ask for, under the session's isolation settings."""

    def __init__(self, config: GuardConfig, required: list[str], build_uid: int | None):
        """``required``: the isolation layers the session refuses to run without; ``build_uid``: the
        sandbox user the compiler runs as (None: this process's own)."""
        self.config, self.build_uid = config, build_uid
        self.required = [layer for layer in required if layer != "pids"]  # the compiler starts no one

    def build(self, request: native.BuildRequest) -> native.BuildResult:
        """Compile ``request`` as candidate builds are compiled: confined, as the sandbox build user."""
        result = native.build(
            request,
            user=self.build_uid,
            group=self.build_uid,
            timeout=self.config.build_timeout_s,
            required=self.required,
            network=self.config.isolate_network,
            filesystem=self.config.isolate_filesystem,
        )
        if not result.ok and result.isolation:
            sandbox.refuse_unless_held(self.required, result.isolation, result.isolation_notes, "a native build")
        return result

    def server(
        self,
        worker: Worker,
        source: str | None,
        diagnostics: list[dict[str, Any]],
        on_build: Callable[[native.BuildRequest], None] | None = None,
    ) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """The reply to ``worker``'s build requests while it loads ``source``; diagnostics go to ``diagnostics``."""
        compiles = 0

        def serve(msg: dict[str, Any]) -> dict[str, Any]:
            nonlocal compiles
            compiles += 1
            request = native.BuildRequest.from_dict(msg.get("request") or {})
            if on_build is not None:
                on_build(request)
            if compiles > MAX_COMPILES:
                result = native.BuildResult(
                    ok=False,
                    key="",
                    path=None,
                    seconds=0.0,
                    cached=False,
                    log="",
                    diagnostics=(native.Diagnostic("error", "too many native builds", None, None),),
                )
            else:
                result = self.build(request)
                worker.record_build(result.isolation, result.isolation_notes)
            diagnostics.extend(_locate(d.to_dict(), request.source, source) for d in result.diagnostics)
            if result.ok and result.path:  # the cache stays private; the worker gets its own copy
                result = dataclasses.replace(result, path=worker.share(result.path))
            return {"result": result.to_dict()}

        return serve
