"""Knobs: module-level constants a candidate declares tunable, read and rewritten as source.

A candidate declares ``KNOBS = {"NAME": [value, …], …}`` (a literal) next to module-level
assignments ``NAME = value``. Settings are applied by rewriting those assignments'
right-hand sides in the source, so every tuned candidate is a standalone file that
``kiln eval`` accepts as it is.
"""

from __future__ import annotations

import ast
import functools
import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

Settings = dict[str, Any]
# literal_eval raises TypeError for unhashable keys ({[1]: 2}) and the rest for deep or odd input.
_LITERAL_ERRORS = (ValueError, TypeError, SyntaxError, MemoryError, RecursionError)


@dataclass(frozen=True)
class Knob:
    """One tunable constant: its current value and the values it may take."""

    name: str
    value: Any
    options: tuple[Any, ...]


class KnobError(ValueError):
    """The candidate's KNOBS declaration is unusable; ``str()`` is one line."""


@functools.lru_cache(maxsize=512)
def _tree(source: str) -> ast.Module:
    """``source`` parsed, once per text: a search reads and rewrites the same few sources thousands of times.
    Callers must not modify the tree."""
    return ast.parse(source)


def _assignments(tree: ast.Module) -> dict[str, ast.Assign]:
    found: dict[str, ast.Assign] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node
    return found


def read_knobs(source: str) -> list[Knob]:
    """The knobs ``source`` declares, in declaration order ([] when it declares none)."""
    try:
        tree = _tree(source)
    except SyntaxError as exc:
        raise KnobError(f"candidate does not parse: {exc.msg} (line {exc.lineno})") from None
    assigned = _assignments(tree)
    if "KNOBS" not in assigned:
        return []
    try:
        declared = ast.literal_eval(assigned["KNOBS"].value)
    except _LITERAL_ERRORS:
        raise KnobError("KNOBS must be a literal dict of lists") from None
    if not isinstance(declared, dict):
        raise KnobError("KNOBS must be a dict mapping constant names to lists of values")
    knobs = []
    for name, options in declared.items():
        if name not in assigned:
            raise KnobError(f"knob {name!r} has no module-level assignment '{name} = …'")
        if not isinstance(options, list | tuple) or not options:
            raise KnobError(f"knob {name!r} needs a non-empty list of values")
        try:
            value = ast.literal_eval(assigned[name].value)
        except _LITERAL_ERRORS:
            raise KnobError(f"knob {name!r} must be assigned a literal") from None
        knobs.append(Knob(name, value, tuple(options)))
    return knobs


def settings_of(knobs: list[Knob]) -> Settings:
    """The current value of every knob."""
    return {k.name: k.value for k in knobs}


def apply(source: str, settings: Settings) -> str:
    """``source`` with each named knob's assignment rewritten to its new value."""
    spans = _spans(source)
    edits = []
    for name, value in settings.items():
        if name not in spans:
            raise KnobError(f"knob {name!r} has no module-level assignment")
        edits.append((*spans[name], repr(value)))
    for start, end, text in sorted(edits, reverse=True):
        source = source[:start] + text + source[end:]
    return source


@functools.lru_cache(maxsize=512)
def _spans(source: str) -> dict[str, tuple[int, int]]:
    """Where each module-level assignment's right-hand side lies in ``source`` (character offsets)."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    spans = {}
    for name, node in _assignments(_tree(source)).items():
        rhs = node.value
        start = offsets[rhs.lineno - 1] + len(lines[rhs.lineno - 1].encode()[: rhs.col_offset].decode())
        end_line = cast(int, rhs.end_lineno)  # parsed nodes carry their end
        end = offsets[end_line - 1] + len(lines[end_line - 1].encode()[: rhs.end_col_offset].decode())
        spans[name] = (start, end)
    return spans


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))  # json.dumps builds one per call otherwise


def key(settings: Settings) -> str:
    """A canonical text for a settings dict (equal settings, equal keys)."""
    return _CANONICAL.encode(settings)


def same(a: Any, b: Any) -> bool:
    """Whether two knob values are equal as written (["-O2"] and ("-O2",) are; 1 and True are not)."""
    return key({"v": a}) == key({"v": b})


def show(value: Any) -> str:
    """A knob value as people write it: lists of flags joined by spaces."""
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return str(value)


def describe(settings: Settings) -> str:
    """``NAME=value, …`` for summaries."""
    return ", ".join(f"{name}={show(value)}" for name, value in settings.items())


def condition(name: str, value: Any) -> str:
    """The experience condition that records ``name`` set to ``value`` (see ``parse_condition``)."""
    return f"set {name}={json.dumps(value, separators=(',', ':'))}"


def parse_condition(text: str) -> tuple[str, Any] | None:
    """(name, value) from a ``set NAME=<json>`` condition, or None for any other condition."""
    if not text.startswith("set ") or "=" not in text:
        return None
    name, _, raw = text[4:].partition("=")
    try:
        return name.strip(), json.loads(raw)
    except json.JSONDecodeError:
        return None


Value = tuple[str, str]  # (knob name, its value's key): one knob value, hashable


def values_of(settings: Settings) -> set[Value]:
    """The knob values ``settings`` holds."""
    return {(name, key({"v": value})) for name, value in settings.items()}


TRAILS = 1.5  # a value trails a rival whose median figure is this many times its own best


def value_record(outcomes: Iterable[tuple[Settings, bool | None, float | None]]) -> dict[Value, tuple[int, bool]]:
    """Each knob value's (evaluations that held it, whether one of them won) over one task's evaluations.

    ``outcomes``: (settings, lost, figure) of each evaluation. Lost means slower than the incumbent it was
    judged against, or failed; None (no contest: the first correct candidate) counts neither way. A lost
    evaluation still wins for a value when its figure is at or above the median of every measured figure (a
    value merely paired with worse ones is not a loser), unless another value of the same knob has a median
    figure ``TRAILS`` times the value's best or more: where most of the search loses, the median sits low,
    and a value at 0.26x whose rival runs at 0.5-1.1x would otherwise pass it forever.
    """
    outcomes = list(outcomes)
    figures = sorted(f for _, _, f in outcomes if f is not None)
    median = figures[len(figures) // 2] if figures else 0.0
    by_value: dict[Value, list[float]] = {}
    for settings, _, figure in outcomes:
        if figure is not None:
            for value in values_of(settings):
                by_value.setdefault(value, []).append(figure)
    rival_best: dict[str, float] = {}  # per knob, the highest median figure any of its values has
    for (name, _), its in by_value.items():
        rival_best[name] = max(rival_best.get(name, 0.0), statistics.median(its))
    record: dict[Value, tuple[int, bool]] = {}
    for settings, lost, figure in outcomes:
        if lost is None:
            continue
        for value in values_of(settings):
            held, any_won = record.get(value, (0, False))
            won = not lost or (figure is not None and figure >= median)
            record[value] = (held + 1, any_won or won)
    trailing = {
        value for value, figures_of in by_value.items() if rival_best.get(value[0], 0.0) >= TRAILS * max(figures_of)
    }
    return {value: (held, won and value not in trailing) for value, (held, won) in record.items()}


def losing_values(outcomes: Iterable[tuple[Settings, bool | None, float | None]], evidence: int) -> frozenset[Value]:
    """Knob values that lost in every evaluation that held them, ``evidence`` evaluations or more (``value_record``)."""
    return frozenset(v for v, (held, won) in value_record(outcomes).items() if held >= evidence and not won)
