"""An ablation's charts: a forest plot of each arm's ratios to the reference, and the reach curves.

Inline SVG like the run report's (``svg.py``): no scripts; hover a point for its figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from kernelkiln.report.ablation_data import SPEED, Arm, Cell, Study, fmt_evals, ratio, tone
from kernelkiln.report.format import fmt_pct
from kernelkiln.report.svg import CHAR_W, XScale, esc, hbars, legend, svg, text, tick_label

WIDTH = 460
ARM_COLOURS = ("#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#00838f", "#8d6e63", "#c0ca33", "#f06292")
TONE_COLOURS = {"better": "#2e7d32", "worse": "#c62828", "": "#455a64"}
ROW_LABELS = {"speedup": "final speedup", "anytime": "anytime speedup", "evals_to_95": "evals to 95%, < 1 better"}
RANGE = (1 / 20, 20.0)  # the widest ratio axis; whiskers beyond it are cut at its edge


# -- forest plot ----------------------------------------------------------------------------
def forest(study: Study) -> str:
    """Each non-reference arm's ratio to the reference per figure: a point, its 95% interval as a whisker."""
    arms = [a for a in study.arms if a.ratio is not None]
    cells = [c for a in arms if a.ratio is not None for c in a.ratio.values() if c is not None]
    low, high = _ratio_range(cells)
    label_w = CHAR_W * max(len(s) for s in ROW_LABELS.values()) + 16
    left, right, top, row_h = label_w, WIDTH - 16, 12, 20
    rows = sum(1 + len(SPEED) for _ in arms)
    base = top + rows * row_h + 6

    def x(v: float) -> float:
        v = min(max(v, low), high)
        return left + (right - left) * (math.log(v) - math.log(low)) / (math.log(high) - math.log(low))

    body = []
    for t in _ratio_ticks(low, high, x):
        body.append(f'<line x1="{x(t):.1f}" y1="{top}" x2="{x(t):.1f}" y2="{base}" stroke="#eee"/>')
        body.append(text(x(t), base + 15, tick_label(t), "middle", 'fill="#555"'))
    body.append(f'<line x1="{x(1.0):.1f}" y1="{top - 4}" x2="{x(1.0):.1f}" y2="{base}" stroke="#000"/>')
    body.append(f'<line x1="{left}" y1="{base}" x2="{right}" y2="{base}" stroke="#999"/>')
    body.append(text((left + right) / 2, base + 32, f"ratio to {study.reference} (log scale)", "middle", 'fill="#333"'))
    body.append(text(WIDTH / 2, base + 48, "speedups: > 1 better · evaluations: < 1 better", "middle", 'fill="#555"'))
    y = top
    for arm in arms:
        body.append(text(6, y + 14, arm.label, extra='font-weight="bold"'))
        y += row_h
        for figure, label in ROW_LABELS.items():
            body.append(text(left - 8, y + 14, label, "end", 'fill="#333"'))
            body.append(_whisker(arm, figure, x, y + 10, (left + right) / 2))
            y += row_h
    return svg(WIDTH, base + 56, body, f"{study.name}: each arm over {study.reference}, 95% intervals")


def _whisker(arm: Arm, figure: str, x: Callable[[float], float], y: float, middle: float) -> str:
    cell = arm.ratio.get(figure) if arm.ratio is not None else None
    if cell is None:
        return text(middle, y + 4, "no figure", "middle", 'fill="#888"')
    colour = TONE_COLOURS[tone(cell, figure)]
    line = text(x(cell.mean) + 8, y + 4, f"k = {cell.k}, no interval", extra='fill="#888"')
    if cell.interval is not None:
        low, high = cell.interval
        lo, hi = x(low), x(high)
        caps = "".join(f"M{end:.1f},{y - 4:.1f}v8" for end, v in ((lo, low), (hi, high)) if RANGE[0] < v < RANGE[1])
        line = f'<path class="ci" d="M{lo:.1f},{y:.1f}H{hi:.1f}{caps}" stroke="{colour}" stroke-width="1.5"/>'
    tip = f"{arm.label}, {SPEED[figure]}: {ratio(cell, figure)} over the reference (k = {cell.k})"
    return f'<g><title>{esc(tip)}</title>{line}<circle cx="{x(cell.mean):.1f}" cy="{y:.1f}" r="4" fill="{colour}"/></g>'


def _ratio_range(cells: Sequence[Cell]) -> tuple[float, float]:
    values = [v for c in cells for v in (c.mean, c.low, c.high) if v is not None and v > 0] + [1.0]
    low, high = max(min(values) / 1.1, RANGE[0]), min(max(values) * 1.1, RANGE[1])
    return min(low, 0.8), max(high, 1.25)


def _ratio_ticks(low: float, high: float, x: Callable[[float], float]) -> list[float]:
    """Round ratios in ``[low, high]``, at least 40 px apart, 1 always among them."""
    candidates = [
        m * 10**e
        for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
        for m in (1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8)
    ]
    ticks = [1.0]
    for t in sorted((t for t in candidates if low <= t <= high), key=lambda t: abs(math.log(t))):
        if all(abs(x(t) - x(u)) >= 40 for u in ticks):
            ticks.append(t)
    return sorted(ticks)


# -- reach curves ---------------------------------------------------------------------------
def arm_colours(studies: Sequence[Study]) -> dict[str, str]:
    """A colour per arm label, the same in every study."""
    labels = dict.fromkeys(a.label for s in studies for a in s.arms)
    return {label: ARM_COLOURS[i % len(ARM_COLOURS)] for i, label in enumerate(labels)}


def reach(study: Study, floor: Arm | None, budget: int, colours: dict[str, str]) -> str:
    """Share of (task, repeat) pairs within 95% of their best after each evaluation: a line per arm."""
    lines = [(a, colours.get(a.label, ARM_COLOURS[0]), "line") for a in study.arms]
    if floor is not None:
        lines.append((floor, "#000", "dash"))
    count = max([budget, *(len(a.reach) for a, _, _ in lines)])
    xs = XScale(count, 56, WIDTH - 16)
    top, plot_h = 12, 170
    base = top + plot_h

    def y(v: float) -> float:
        return base - plot_h * v

    body = []
    for t in (0, 0.25, 0.5, 0.75, 1.0):
        body.append(f'<line x1="{xs.left}" y1="{y(t):.1f}" x2="{xs.right}" y2="{y(t):.1f}" stroke="#eee"/>')
        body.append(text(xs.left - 6, y(t) + 4, fmt_pct(t), "end", 'fill="#555"'))
    body.append(
        text(
            14,
            top + plot_h / 2,
            "pairs within 95% of best",
            "middle",
            f'transform="rotate(-90 14 {top + plot_h / 2:.0f})" fill="#333"',
        )
    )
    body += xs.axis(base, "evaluation")
    for n, (arm, colour, kind) in enumerate(lines):
        if not arm.reach:
            continue
        dash = ' stroke-dasharray="5 3"' if kind == "dash" else ""
        wide = 2 + 1.2 * max(len(study.arms) - 1 - n, 0)  # earlier arms wider: equal curves show one edged by another
        points = " ".join(f"{xs(i):.1f},{y(v):.1f}" for i, v in enumerate(arm.reach, 1))
        body.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="{wide:g}"{dash}/>')
        body += [
            f'<circle cx="{xs(i):.1f}" cy="{y(v):.1f}" r="2.5" fill="{colour}"><title>{esc(arm.label)} after '
            f"evaluation {i}: {fmt_pct(v)} of pairs within 95% of their best</title></circle>"
            for i, v in enumerate(arm.reach, 1)
        ]
    items = [(a.label + ("" if a.reach else " (no curve)"), colour, kind) for a, colour, kind in lines]
    legend_y = base + 56
    for row in _rows(items, xs.right - xs.left):
        body.append(legend(xs.left, legend_y, row))
        legend_y += 18
    return svg(WIDTH, legend_y, body, f"{study.name}: evaluations to 95% of the best, per arm")


def _rows(items: list[tuple[str, str, str]], width: float) -> list[list[tuple[str, str, str]]]:
    """Legend items packed into lines that fit ``width``."""
    rows: list[list[tuple[str, str, str]]] = [[]]
    used = 0.0
    for item in items:
        need = 18 + CHAR_W * len(item[0]) + 16
        if rows[-1] and used + need > width:
            rows.append([])
            used = 0.0
        rows[-1].append(item)
        used += need
    return rows


# -- reuse ----------------------------------------------------------------------------------
def reuse_bars(study: Study) -> str:
    """The second pass's evaluations to the first pass's best, a bar per repeat."""
    rows = [(f"repeat {k}", [v if isinstance(v, int | float) else None]) for k, v in enumerate(study.per_repeat, 1)]
    n = study.second_pass_budget
    return hbars(
        rows,
        [("evaluations to the first pass's best", "#00838f")],
        unit="evaluations per task (mean)",
        ref=n,
        ref_label=f"budget {n}" if n else "",
        fmt=fmt_evals,
        title=f"{study.name}: per repeat",
        width=WIDTH,
    )
