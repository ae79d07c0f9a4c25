"""Turn compiler output into structured ``Diagnostic`` records.

GCC is run with ``-fdiagnostics-format=json`` and prints one JSON array per line on
stderr; any other line (linker, driver, or a compiler without JSON support) is matched
against the classic ``file:line:col: severity: message`` form. nvcc adds its front
end's ``kernel.cu(12): error: ...`` (no column: it echoes the macro-expanded line, so
a caret position would mislead) and its tools' ``ptxas error   : ...`` lines; nvcc
reports most messages once per compilation pass, so repeats are dropped. Locations
outside the candidate's own file keep their position in the message and get
``line=None``, so a line number always means a line of the candidate's source.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from .records import Diagnostic

__all__ = ["parse_diagnostics", "render_log"]

_CLASSIC = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)?\s*"
    r"(?P<sev>fatal error|error|warning|note):\s*(?P<msg>.*)$"
)
_NVCC = re.compile(
    r"^(?P<file>[^\n]+?)\((?P<line>\d+)\): (?P<sev>catastrophic error|internal error|error|"
    r"warning|remark|note)(?: #(?P<num>[\w-]+))?:\s*(?P<msg>.*)$"
)
_TOOL = re.compile(
    r"^(?P<tool>nvcc|ptxas|nvlink|fatbinary|cicc|cudafe\+\+)(?: (?P<file>[^,\n]+), line "
    r"(?P<line>\d+);)?\s+(?P<sev>fatal|error|warning|info)\s*:\s*(?P<msg>.*)$"
)
_DRIVER = re.compile(r"^(?P<tool>[^:\n]+):\s*(?P<sev>fatal error|internal compiler error|error):\s*(?P<msg>.*)$")


def parse_diagnostics(output: str, filename: str) -> tuple[tuple[Diagnostic, ...], list[str]]:
    """Parse compiler output; return (diagnostics, lines that were not JSON)."""
    diagnostics: list[Diagnostic] = []
    text_lines: list[str] = []
    for raw in output.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            try:
                entries = json.loads(line)
            except ValueError:
                entries = None
            if isinstance(entries, list):
                diagnostics.extend(_from_json(entries, filename))
                continue
        if line:
            text_lines.append(raw)
            parsed = _from_text(line, filename)
            if parsed is not None:
                diagnostics.append(parsed)
    return tuple(dict.fromkeys(diagnostics)), text_lines


def render_log(diagnostics: Iterable[Diagnostic], text_lines: Iterable[str], filename: str) -> str:
    """A human-readable log: diagnostics in GCC style, then unparsed output lines."""
    lines = [d.format(filename) for d in diagnostics]
    lines.extend(t for t in text_lines if _from_text(t.strip(), filename) is None)
    return "\n".join(lines)


def _from_json(entries: list[Any], filename: str) -> Iterable[Diagnostic]:
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        yield _json_entry(entry, filename)
        for child in entry.get("children") or ():
            if isinstance(child, dict):
                yield _json_entry(child, filename)


def _json_entry(entry: dict[str, Any], filename: str) -> Diagnostic:
    severity = _severity(str(entry.get("kind", "error")))
    message = str(entry.get("message", ""))
    caret = _caret(entry)
    file = caret.get("file")
    line, column = _as_int(caret.get("line")), _as_int(caret.get("column"))
    return _located(severity, message, file, line, column, filename)


def _caret(entry: dict[str, Any]) -> dict[str, Any]:
    locations = entry.get("locations") or ()
    if locations and isinstance(locations[0], dict):
        caret = locations[0].get("caret")
        if isinstance(caret, dict):
            return caret
    return {}


def _from_text(line: str, filename: str) -> Diagnostic | None:
    match = _CLASSIC.match(line)
    if match is not None:
        return _located(
            _severity(match["sev"]), match["msg"], match["file"], int(match["line"]), _as_int(match["col"]), filename
        )
    match = _NVCC.match(line)
    if match is not None:
        message = match["msg"] + (f" [#{match['num']}]" if match["num"] else "")
        return _located(_severity(match["sev"]), message, match["file"], int(match["line"]), None, filename)
    match = _TOOL.match(line)
    if match is not None and not match["msg"].startswith("Compile time"):
        where = ""
        if match["line"]:  # a line of an intermediate file (PTX), not of the candidate
            kind = "PTX" if match["file"].endswith(".ptx") else match["file"]
            where = f" ({kind} line {match['line']})"
        return Diagnostic(_severity(match["sev"]), f"{match['tool']}: {match['msg']}{where}")
    match = _DRIVER.match(line)
    if match is not None:
        return Diagnostic("error", f"{match['tool'].strip()}: {match['sev']}: {match['msg']}")
    return None


def _located(
    severity: str, message: str, file: str | None, line: int | None, column: int | None, filename: str
) -> Diagnostic:
    if file is None or file == filename:
        return Diagnostic(severity, message, line, column)
    where = file if line is None else f"{file}:{line}"
    return Diagnostic(severity, f"{where}: {message}")


def _severity(kind: str) -> str:
    kind = kind.lower()
    if "error" in kind or "sorry" in kind or kind in ("ice", "fatal"):
        return "error"
    if "warning" in kind or kind == "pedwarn":
        return "warning"
    return "note"


def _as_int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None
