"""Build records: a request to compile, its result, and compiler diagnostics.

All three are frozen dataclasses that round-trip through JSON-ready dicts and ignore
unknown keys, so a sandboxed worker and the trusted parent can exchange them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("error", "warning", "note")
_FILENAMES = {"c": "kernel.c", "c++": "kernel.cpp", "cuda": "kernel.cu"}


@dataclass(frozen=True)
class Diagnostic:
    """One compiler message; ``line``/``column`` refer to the candidate's source."""

    severity: str
    message: str
    line: int | None = None
    column: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"severity": self.severity, "message": self.message, "line": self.line, "column": self.column}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Diagnostic:
        return cls(
            severity=str(data["severity"]),
            message=str(data["message"]),
            line=_opt_int(data.get("line")),
            column=_opt_int(data.get("column")),
        )

    def format(self, filename: str) -> str:
        """One line in the compiler's own style: ``kernel.c:12:5: error: ...``."""
        where = filename
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        message = " ".join(self.message.split())
        return f"{where}: {self.severity}: {message}"


@dataclass(frozen=True)
class BuildRequest:
    """What to compile: source text, ``lang`` ("c", "c++" or "cuda") and extra flags.

    ``module`` names a Python extension module: the source is then a torch C++ extension
    (``load_inline``'s form), built against torch's headers and imported, not bound with ctypes.
    """

    source: str
    lang: str = "c"
    flags: tuple[str, ...] = ()
    module: str = ""

    def __post_init__(self) -> None:
        # Accept any sequence (a list from JSON) but store a hashable tuple.
        if not isinstance(self.flags, tuple):
            object.__setattr__(self, "flags", tuple(self.flags))

    @property
    def filename(self) -> str:
        """The name the source is compiled under; diagnostics are reported against it."""
        if self.module:
            return "main.cpp"  # as torch's load_inline names it
        return _FILENAMES.get(self.lang, "kernel.c")

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "lang": self.lang, "flags": list(self.flags), "module": self.module}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BuildRequest:
        return cls(
            source=str(data["source"]),
            lang=str(data.get("lang", "c")),
            flags=tuple(str(f) for f in data.get("flags", ())),
            module=str(data.get("module", "")),
        )


@dataclass(frozen=True)
class BuildResult:
    """Outcome of a build. ``path`` is the cached shared library when ``ok``; ``isolation``
    the layers that held around the compiler (empty when it did not run: a cache hit), with
    ``isolation_notes`` saying why for each that did not."""

    ok: bool
    key: str
    path: str | None
    diagnostics: tuple[Diagnostic, ...] = ()
    cached: bool = False
    seconds: float = 0.0
    log: str = ""
    isolation: dict[str, bool] = field(default_factory=dict)
    isolation_notes: dict[str, str] = field(default_factory=dict)

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity == "error")

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "key": self.key,
            "path": self.path,
            "diagnostics": [d.to_dict() for d in self.diagnostics],
            "cached": self.cached,
            "seconds": self.seconds,
            "log": self.log,
            "isolation": dict(self.isolation),
            "isolation_notes": dict(self.isolation_notes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BuildResult:
        return cls(
            ok=bool(data["ok"]),
            key=str(data.get("key", "")),
            path=None if data.get("path") is None else str(data["path"]),
            diagnostics=tuple(Diagnostic.from_dict(d) for d in data.get("diagnostics", ())),
            cached=bool(data.get("cached", False)),
            seconds=float(data.get("seconds", 0.0)),
            log=str(data.get("log", "")),
            isolation={str(k): bool(v) for k, v in dict(data.get("isolation") or {}).items()},
            isolation_notes={str(k): str(v) for k, v in dict(data.get("isolation_notes") or {}).items()},
        )


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)
