"""An ablation.json of `kiln ablate` read for a report: studies, arms, and their tables as formatted cells.

The HTML page and the Markdown share these tables, so both say the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from kernelkiln.report.format import fmt_tokens, fmt_x

SPEED = {"speedup": "final speedup", "anytime": "anytime speedup", "evals_to_95": "evaluations to 95%"}
TOKENS = {"prompt_tokens": "prompt tokens per run", "max_prompt_tokens": "largest prompt"}
FEWER_IS_BETTER = {"evals_to_95", "prompt_tokens", "max_prompt_tokens"}
STORES = (
    "store: empty = a fresh store per task; crossfit = built on the other half of the tasks, still learning; "
    "readonly = that store lent read-only; reuse = the store that already holds the tasks."
)


@dataclass(frozen=True)
class Cell:
    """A figure over the repeats: its mean and 95% interval (None when k = 1)."""

    mean: float
    low: float | None
    high: float | None
    k: int

    @classmethod
    def of(cls, raw: Any) -> Cell | None:
        """ablation.json's ``{"mean", "ci95", "k"}``; None when missing or not a number."""
        if not isinstance(raw, dict) or not _number(raw.get("mean")):
            return None
        ci = raw.get("ci95")
        raw_k = raw.get("k")
        k = raw_k if isinstance(raw_k, int) else 1
        if k < 2 or not (isinstance(ci, list) and len(ci) == 2 and all(map(_number, ci))):
            return cls(float(raw["mean"]), None, None, k)
        return cls(float(raw["mean"]), float(ci[0]), float(ci[1]), k)

    @property
    def interval(self) -> tuple[float, float] | None:
        return (self.low, self.high) if self.low is not None and self.high is not None else None


@dataclass(frozen=True)
class Arm:
    label: str
    memory: str
    figures: dict[str, Cell | None]
    ratio: dict[str, Cell | None] | None  # over the study's reference; None on the reference itself
    vs_floor: dict[str, Cell | None] | None
    reach: tuple[float, ...]


@dataclass(frozen=True)
class Study:
    name: str
    question: str
    metric: str  # speedup | tokens | reuse
    reference: str
    seconds: float
    arms: tuple[Arm, ...] = ()
    second_pass_budget: int | None = None  # reuse only, from here on
    evaluations: Cell | None = None
    per_repeat: tuple[float | None, ...] = ()
    in_one: tuple[int, ...] = ()


@dataclass(frozen=True)
class Ablation:
    folder: Path
    budget: int
    repeat: int
    tasks: tuple[str, ...]
    figures: str
    floor: Arm | None
    studies: tuple[Study, ...]
    total_seconds: float | None = None  # every unit once (ablation.json's "seconds")

    @property
    def seconds(self) -> float:
        """The ablation's wall time: every unit once when recorded, else the studies' sum (shared units twice)."""
        return self.total_seconds if self.total_seconds is not None else sum(s.seconds for s in self.studies)


def parse(folder: Path, data: dict[str, Any]) -> Ablation:
    """ablation.json's object; missing parts read as empty."""
    studies = tuple(_study(str(name), s) for name, s in data["studies"].items() if isinstance(s, dict))
    return Ablation(
        folder=folder,
        budget=int(data.get("budget") or 0),
        repeat=int(data.get("repeat") or 0),
        tasks=tuple(str(t) for t in data.get("tasks") or ()),
        figures=str(data.get("figures") or ""),
        floor=_arm(data["floor"]) if isinstance(data.get("floor"), dict) else None,
        studies=studies,
        total_seconds=float(data["seconds"]) if isinstance(data.get("seconds"), int | float) else None,
    )


class _Common(TypedDict):
    """The fields every study has."""

    name: str
    question: str
    metric: str
    reference: str
    seconds: float


def _study(name: str, raw: dict[str, Any]) -> Study:
    common: _Common = {
        "name": name,
        "question": str(raw.get("question", "")),
        "metric": str(raw.get("metric", "speedup")),
        "reference": str(raw.get("reference", "")),
        "seconds": float(raw.get("seconds") or 0.0),
    }
    if common["metric"] == "reuse":
        runs = [r for r in raw.get("runs") or () if isinstance(r, dict)]
        return Study(
            **common,
            second_pass_budget=raw.get("second_pass_budget") or None,
            evaluations=Cell.of(raw.get("evaluations_to_first_best")),
            per_repeat=tuple(r.get("evaluations_to_first_best") for r in runs),
            in_one=tuple(n for n in raw.get("in_one") or () if isinstance(n, int)),
        )
    return Study(**common, arms=tuple(_arm(a) for a in raw.get("arms") or () if isinstance(a, dict)))


def _arm(raw: dict[str, Any]) -> Arm:
    def cells(figures: Any) -> dict[str, Cell | None] | None:
        return {k: Cell.of(v) for k, v in figures.items()} if isinstance(figures, dict) else None

    return Arm(
        label=str(raw.get("arm", "?")),
        memory=str(raw.get("memory", "")),
        figures={k: Cell.of(raw.get(k)) for k in (*SPEED, *TOKENS)},
        ratio=cells(raw.get("ratio")),
        vs_floor=cells(raw.get("vs_floor")),
        reach=tuple(float(v) for v in raw.get("reach") or ()),
    )


# -- tables ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shown:
    """A cell as text: the mean, its ``[low, high]`` and, for a ratio, whether it is clearly better or worse."""

    value: str
    interval: str = ""
    tone: str = ""  # better | worse | ""

    def __str__(self) -> str:
        return f"{self.value} {self.interval}".strip()


@dataclass(frozen=True)
class Row:
    label: str
    kind: str  # arm | ratio | floor
    memory: str
    cells: tuple[Shown, ...]


@dataclass(frozen=True)
class Table:
    head: tuple[str, ...]
    rows: tuple[Row, ...]


def figures_of(study: Study) -> dict[str, str]:
    """The study's figures (key: heading)."""
    return TOKENS if study.metric == "tokens" else SPEED


def table(study: Study, floor: Arm | None) -> Table:
    """A row per arm (its figures) and under each non-reference arm a row of its ratios to the reference."""
    figures = figures_of(study)
    against_floor = study.metric == "speedup" and any(a.vs_floor for a in study.arms)
    head = ("arm", "store", *figures.values(), *(["anytime / best-of-N"] if against_floor else []))
    rows = []
    for arm in study.arms:
        vs = [ratio(arm.vs_floor.get("anytime"), "anytime") if arm.vs_floor else Shown("—")] if against_floor else []
        rows.append(Row(arm.label, "arm", arm.memory, (*(show(arm.figures.get(f), f) for f in figures), *vs)))
        if arm.ratio is not None:
            rows.append(
                Row(
                    f"{arm.label} / {study.reference}",
                    "ratio",
                    "",
                    (*(ratio(arm.ratio.get(f), f) for f in figures), *([Shown("")] if vs else [])),
                )
            )
    if against_floor and floor is not None:
        rows.append(Row(floor.label, "floor", "floor", (*(show(floor.figures.get(f), f) for f in figures), Shown(""))))
    return Table(head, tuple(rows))


def show(cell: Cell | None, figure: str) -> Shown:
    """A figure: ``1.23x [1.05, 1.44]``; the mean alone when k = 1; ``—`` when unknown."""
    return _shown(cell, _formatter(figure))


def ratio(cell: Cell | None, figure: str) -> Shown:
    """A ratio as ``1.12x [0.95, 1.31]``, toned better or worse when its interval excludes 1."""
    shown = _shown(cell, fmt_x)
    return Shown(shown.value, shown.interval, tone(cell, figure))


def tone(cell: Cell | None, figure: str) -> str:
    """``better`` or ``worse`` when the ratio's interval lies wholly on that side of 1, else ``""``."""
    interval = cell.interval if cell is not None else None
    if interval is None or interval[0] <= 1 <= interval[1]:
        return ""
    above = interval[0] > 1
    return "better" if above != (figure in FEWER_IS_BETTER) else "worse"


def fmt_evals(value: float) -> str:
    return f"{value:.1f}"


def reuse_line(study: Study, tasks: int) -> str:
    """The reuse study in one sentence."""
    cell = study.evaluations
    needed = "—" if cell is None else str(_shown(cell, fmt_evals))
    n = study.second_pass_budget
    budget = f" (in a budget of {n}; a task that never got there counts {n + 1})" if n else ""
    of = f" of {tasks} tasks" if tasks else " tasks"
    one = f"; reached in one evaluation: {', '.join(map(str, study.in_one))}{of}, by repeat" if study.in_one else ""
    return f"The second pass needed {needed} evaluations per task to reach 95% of the first pass's best{budget}{one}."


def _formatter(figure: str) -> Callable[[float], str]:
    if figure in TOKENS:
        return lambda v: fmt_tokens(round(v))
    return fmt_evals if figure == "evals_to_95" else fmt_x


def _shown(cell: Cell | None, fmt: Callable[[float], str]) -> Shown:
    if cell is None:
        return Shown("—")
    bound = (lambda v: fmt(v).removesuffix("x")) if fmt is fmt_x else fmt  # 1.23x [1.05, 1.44]
    interval = cell.interval
    return Shown(fmt(cell.mean), f"[{bound(interval[0])}, {bound(interval[1])}]" if interval else "")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
