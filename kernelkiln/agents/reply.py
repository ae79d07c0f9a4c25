"""The text reply protocol: a candidate handed in as plain text, for endpoints without tool calling.

A reply holds, anywhere among its prose:
- exactly one fenced block tagged ``python`` (or ``py``): the complete file defining ``ModelNew``;
- exactly one line ``Summary: …`` outside the fences (``**Summary:**`` and a leading ``-`` or
  ``#`` are fine): the strategy, clipped to SUMMARY_CHARS characters;
- one fenced block tagged ``json``, ``{"adopted": [ids], "not_adopted": [{"id": …, "why": …}]}``,
  naming every shown experience id in exactly one list (an adopted entry may also be
  ``{"id": …, "why": …}``; ids that were not shown are ignored).
Fences tagged otherwise (```c, untagged) are prose. A reply that lacks, repeats or garbles the
code or the Summary is asked again, never guessed; only the reply's text is read, never its
reasoning. The adoption record is bookkeeping: a reply whose record is absent, garbled or
incomplete still hands in its candidate, the ids it does not account for being *not stated*
(``TextReply.not_stated``, with ``record_problems`` saying why).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kernelkiln.policy.turn import Choice
from kernelkiln.store.records import SUMMARY_CHARS

Part = Literal["python block", "Summary line", "adoption JSON"]

_FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w.+-]*)[^`]*$")
_SUMMARY = re.compile(
    r"^\s*(?:[-*#]+\s*)?(?:\*\*|__)?summary(?:\*\*|__)?\s*:\s*(?:\*\*|__)?(.*?)(?:\*\*|__)?\s*$", re.IGNORECASE
)
WHY_CHARS = 300


@dataclass(frozen=True)
class Problem:
    """What one part of a reply got wrong, as the re-ask says it."""

    part: Part
    text: str


@dataclass(frozen=True)
class TextReply:
    """A complete text-protocol reply."""

    code: str
    summary: str
    choices: tuple[Choice, ...]  # one per shown experience the record states, in shown order
    notes: str  # the prose around the parts
    not_stated: tuple[str, ...] = ()  # shown experiences the record does not account for
    record_problems: tuple[str, ...] = ()  # why (empty when the record is complete)


@dataclass(frozen=True)
class _Fence:
    tag: str
    body: str


def parse_text_reply(text: str, shown: Sequence[str]) -> tuple[TextReply | None, list[Problem]]:
    """The reply, or None with every problem found (the re-ask names them all at once)."""
    fences, prose = _split(text)
    problems: list[Problem] = []
    code = _one(fences, ("python", "py"), "python block", problems)
    if code is not None and "ModelNew" not in code:
        problems.append(Problem("python block", "the ```python block must be the complete file defining ModelNew"))
    summaries = [m.group(1).strip() for line in prose if (m := _SUMMARY.match(line))]
    summary = " ".join(summaries[0].split())[:SUMMARY_CHARS] if len(summaries) == 1 else ""
    if len(summaries) > 1:
        problems.append(Problem("Summary line", f"the reply has {len(summaries)} Summary lines: give exactly one"))
    elif not summary:
        problems.append(
            Problem(
                "Summary line", f"no `Summary: ...` line (at most {SUMMARY_CHARS} characters, outside the code blocks)"
            )
        )
    if problems:
        return None, problems
    unstated: list[Problem] = []
    choices = _choices(fences, shown, unstated)
    notes = "\n".join(line for line in prose if not _SUMMARY.match(line)).strip()
    missing = tuple(i for i in shown if i not in {c.experience_id for c in choices})
    return TextReply(code or "", summary, choices, notes, missing, tuple(p.text for p in unstated)), []


def records_in(text: str, shown: Sequence[str]) -> tuple[Choice, ...]:
    """The adoption records a reply's ```json block states for ``shown`` ids, in shown order."""
    return _choices(_split(text)[0], shown, [])


def _split(text: str) -> tuple[list[_Fence], list[str]]:
    """The fenced blocks (tag in lower case) and the lines outside them; an unclosed fence runs to the end."""
    fences: list[_Fence] = []
    prose: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            prose.append(lines[i])
            i += 1
            continue
        marker, body = opened.group(1), []
        i += 1
        while i < len(lines) and not (
            lines[i].strip().startswith(marker[0] * len(marker)) and not lines[i].strip().strip(marker[0])
        ):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence
        fences.append(_Fence(opened.group(2).lower(), "\n".join(body)))
    return fences, prose


def _one(fences: list[_Fence], tags: tuple[str, ...], part: Part, problems: list[Problem]) -> str | None:
    found = [f.body for f in fences if f.tag in tags]
    if len(found) > 1:
        problems.append(Problem(part, f"the reply has {len(found)} ```{tags[0]} blocks: give exactly one"))
    elif not found:
        problems.append(Problem(part, f"no ```{tags[0]} block"))
    return found[0] if len(found) == 1 else None


def _choices(fences: list[_Fence], shown: Sequence[str], problems: list[Problem]) -> tuple[Choice, ...]:
    """A Choice for each shown id the adoption JSON states once (with problems for the rest)."""
    if not shown:
        return ()
    block = _one(fences, ("json",), "adoption JSON", problems)
    if block is None:
        return ()
    try:
        data = json.loads(block)
    except json.JSONDecodeError as exc:
        problems.append(Problem("adoption JSON", f"the ```json block is not valid JSON ({exc.msg}, line {exc.lineno})"))
        return ()
    records = _records(data)
    if records is None:
        problems.append(
            Problem(
                "adoption JSON",
                'the ```json block must be {"adopted": [ids], "not_adopted": [{"id": ..., "why": ...}]}',
            )
        )
        return ()
    twice = sorted({i for i, _, _ in records if sum(1 for j, _, _ in records if j == i) > 1} & set(shown))
    missing = [i for i in shown if i not in {r[0] for r in records}]
    if twice:
        problems.append(Problem("adoption JSON", f"listed more than once: {', '.join(twice)}"))
    if missing:
        problems.append(Problem("adoption JSON", f"no adoption record for {', '.join(missing)}"))
    by_id = {i: (adopted, why) for i, adopted, why in records if i not in twice}
    return tuple(Choice(i, by_id[i][0], by_id[i][1][:WHY_CHARS]) for i in shown if i in by_id)


def _records(data: Any) -> list[tuple[str, bool, str]] | None:
    """(id, adopted, why) of each entry, or None when the object has another shape."""
    if not isinstance(data, dict):
        return None
    out = []
    for key, adopted in (("adopted", True), ("not_adopted", False)):
        entries = data.get(key, [])
        if not isinstance(entries, list):
            return None
        for entry in entries:
            if isinstance(entry, str) and adopted:
                out.append((entry, True, ""))
            elif isinstance(entry, dict) and isinstance(entry.get("id"), str):
                out.append((entry["id"], adopted, " ".join(str(entry.get("why", "")).split())))
            else:
                return None
    return out


def prose(text: str) -> str:
    """A reply's text without its fenced blocks (for the journal's notes)."""
    return "\n".join(_split(text)[1]).strip()
