"""Tiny hand-written SVG charts: labelled bars, a trajectory per agent, memory growth.

Every chart is a string of inline SVG: no scripts, no external assets. All text passes
through ``esc`` (summaries come from models and candidates and are untrusted); tooltips
are SVG ``<title>`` elements, which browsers show on hover without JavaScript.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from typing import cast

from kernelkiln.report.format import fmt_x
from kernelkiln.report.records import Point

VERDICT_COLOURS = {"KEEP": "#2e7d32", "ACCEPT": "#1565c0", "REVERT": "#ef6c00", "REJECT": "#c62828"}
AGENT_COLOURS = ("#455a64", "#00acc1", "#8d6e63", "#f06292", "#5c6bc0", "#c0ca33", "#000000", "#ffb300")
DRAFT_COLOUR = "#7b1fa2"
FONT = 'font-family="system-ui, sans-serif" font-size="12"'
CHAR_W = 6.6  # the average width of a 12px character, for laying out labels


def esc(text: object) -> str:
    """Text made safe for SVG/HTML content and attributes."""
    return html.escape(str(text), quote=True)


def svg(width: float, height: float, body: list[str], title: str) -> str:
    """An ``<svg>`` element with an accessible title."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{esc(title)}" {FONT}>'
        f"<title>{esc(title)}</title>{''.join(body)}</svg>"
    )


def text(x: float, y: float, content: object, anchor: str = "start", extra: str = "") -> str:
    """A text element."""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {extra}>{esc(content)}</text>'


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least ``high``."""
    high = high if high > 0 else 1.0
    raw = high / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(math.ceil(high / step - 1e-9) + 1)]


def log_ticks(low: float, high: float) -> list[float]:
    """1-2-5 ticks covering ``[low, high]``."""
    ticks = []
    for exp in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        ticks += [m * 10**exp for m in (1, 2, 5) if low <= m * 10**exp <= high]
    return ticks


def log_floor(value: float) -> float:
    """The largest 1-2-5 value at or below ``value``."""
    exp = math.floor(math.log10(value))
    return cast(float, next((m * 10**exp for m in (5, 2) if m * 10**exp <= value), 10**exp))


def tick_label(value: float) -> str:
    """A tick value without trailing zeros."""
    return f"{value:g}"


# -- bars -----------------------------------------------------------------------------
def hbars(
    rows: Sequence[tuple[str, Sequence[float | None]]],
    series: Sequence[tuple[str, str]],
    *,
    unit: str,
    ref: float | None = None,
    ref_label: str = "",
    fmt: Callable[[float], str] = fmt_x,
    tick_fmt: Callable[[float], str] | None = None,
    title: str,
    width: int = 760,
) -> str:
    """Horizontal bars: a group per row (its label left), a bar per series (name, colour), value labels.

    ``ref`` draws a dashed vertical line (e.g. 1.0x: as fast as torch) labelled ``ref_label``.
    """
    label_w = max(CHAR_W * max((len(r[0]) for r in rows), default=4) + 24, 90)  # wide letters (m, w) run over
    bar_h, gap = 14, 10
    group_h = bar_h * len(series) + gap
    top, bottom = 26, 40
    left, right = label_w, width - 70
    values = [v for _, vs in rows for v in vs if v is not None]
    ticks = nice_ticks(max(values + ([ref] if ref else []) + [0.0]) * 1.05)
    high = ticks[-1]
    height = top + group_h * len(rows) + bottom

    def x(v: float) -> float:
        return left + (right - left) * v / high

    body = [legend(left, 14, [(name, colour, "bar") for name, colour in series])]
    for t in ticks:
        body.append(f'<line x1="{x(t):.1f}" y1="{top - 4}" x2="{x(t):.1f}" y2="{height - bottom + 4}" stroke="#eee"/>')
        body.append(text(x(t), height - bottom + 18, (tick_fmt or tick_label)(t), "middle", 'fill="#555"'))
    body.append(text((left + right) / 2, height - 6, unit, "middle", 'fill="#333"'))
    for i, (label, vs) in enumerate(rows):
        y0 = top + i * group_h
        body.append(text(left - 8, y0 + group_h / 2 - gap / 2 + 4, label, "end"))
        if all(v is None for v in vs):
            body.append(text(left + 4, y0 + group_h / 2 - gap / 2 + 4, "no figures", extra='fill="#888"'))
            continue
        for j, (v, (name, colour)) in enumerate(zip(vs, series, strict=False)):
            y = y0 + j * bar_h
            if v is None:
                body.append(text(left + 4, y + bar_h - 3, f"{name}: none", extra='fill="#888"'))
                continue
            w = max(x(v) - left, 1.0)
            body.append(
                f'<rect x="{left}" y="{y:.1f}" width="{w:.1f}" height="{bar_h - 2}" fill="{colour}">'
                f"<title>{esc(label)} {esc(name)}: {esc(fmt(v))}</title></rect>"
            )
            body.append(text(left + w + 4, y + bar_h - 3, fmt(v), extra='fill="#333"'))
    if ref is not None:
        body.append(
            f'<line x1="{x(ref):.1f}" y1="{top - 6}" x2="{x(ref):.1f}" y2="{height - bottom}" '
            f'stroke="#000" stroke-dasharray="4 3"/>'
        )
        body.append(text(x(ref) + 4, top - 8, ref_label, extra='fill="#000"'))
    return svg(width, height, body, title)


# -- markers and legends ------------------------------------------------------------------
def marker(verdict: str, x: float, y: float, tip: str = "", r: float = 5.0) -> str:
    """A verdict's marker: KEEP ●, ACCEPT ◆, REVERT ▼, REJECT ✕ (shape and colour both say it)."""
    c = VERDICT_COLOURS.get(verdict, "#999")
    title = f"<title>{esc(tip)}</title>" if tip else ""
    if verdict == "ACCEPT":
        pts = f"{x:.1f},{y - r - 1:.1f} {x + r + 1:.1f},{y:.1f} {x:.1f},{y + r + 1:.1f} {x - r - 1:.1f},{y:.1f}"
        return f'<polygon points="{pts}" fill="{c}" stroke="#fff">{title}</polygon>'
    if verdict == "REVERT":
        pts = f"{x - r:.1f},{y - r + 1:.1f} {x + r:.1f},{y - r + 1:.1f} {x:.1f},{y + r:.1f}"
        return f'<polygon points="{pts}" fill="{c}" stroke="#fff">{title}</polygon>'
    if verdict == "REJECT":
        d = (
            f"M{x - r + 1:.1f},{y - r + 1:.1f}L{x + r - 1:.1f},{y + r - 1:.1f}M{x - r + 1:.1f},{y + r - 1:.1f}"
            f"L{x + r - 1:.1f},{y - r + 1:.1f}"
        )
        hit = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="transparent"/>'
        return f'<g>{title}{hit}<path d="{d}" stroke="{c}" stroke-width="2.2"/></g>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{c}" stroke="#fff">{title}</circle>'


def legend(x: float, y: float, items: Sequence[tuple[str, str, str]]) -> str:
    """A one-line legend; each item is (label, colour, kind) with kind bar, line, dash, draft or a verdict."""
    out = []
    for label, colour, kind in items:
        if kind == "bar":
            out.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="12" height="10" fill="{colour}"/>')
        elif kind in ("line", "dash", "draft"):
            dash = {"line": "", "dash": ' stroke-dasharray="5 3"', "draft": ' stroke-dasharray="2 3"'}[kind]
            out.append(
                f'<line x1="{x:.1f}" y1="{y - 4:.1f}" x2="{x + 14:.1f}" y2="{y - 4:.1f}" stroke="{colour}" '
                f'stroke-width="2"{dash}/>'
            )
        else:
            out.append(marker(kind, x + 6, y - 4, r=4.5))
        out.append(text(x + 18, y, label, extra='fill="#333"'))
        x += 18 + CHAR_W * len(label) + 16
    return "".join(out)


# -- trajectory -------------------------------------------------------------------------
class XScale:
    """Attempt number → x, shared by a task's trajectory and its graph so that they line up."""

    PAD = 14  # the first and last attempts sit this far inside the axis

    def __init__(self, count: int, left: float = 64, right: float = 900):
        self.count, self.left, self.right = max(count, 1), left, right

    def __call__(self, index: int) -> float:
        if self.count == 1:
            return (self.left + self.right) / 2
        inner = self.right - self.left - 2 * self.PAD
        return self.left + self.PAD + inner * (index - 1) / (self.count - 1)

    def axis(self, y: float, label: str = "attempt # (in the order the guard judged them)") -> list[str]:
        """Integer ticks under a chart, and the axis label."""
        step = max(1, math.ceil(self.count / 20))
        out = [f'<line x1="{self.left}" y1="{y:.1f}" x2="{self.right}" y2="{y:.1f}" stroke="#999"/>']
        for i in range(1, self.count + 1):
            if i == 1 or i % step == 0:
                out.append(text(self(i), y + 15, i, "middle", 'fill="#555"'))
        out.append(text((self.left + self.right) / 2, y + 32, label, "middle", 'fill="#333"'))
        return out


def tip(p: Point) -> str:
    """A point's hover text."""
    lens = f" ({p.lens})" if p.lens else ""
    draft = " [drafting]" if p.drafting else ""
    against = f" ({fmt_x(p.vs_best)} vs the best of that moment, which decided the verdict)" if p.vs_best else ""
    return f"#{p.index} {p.agent}{lens} {p.verdict} {fmt_x(p.speedup)} vs torch{against}{draft}: {p.summary}"


def trajectory(points: Sequence[Point], agents: Sequence[str], title: str, width: int = 940) -> str:
    """Speedup vs torch per attempt: a line per agent, a marker per verdict, dashes where drafting began."""
    xs = XScale(len(points), 64, width - 40)
    top, plot_h = 44, 230
    base = top + plot_h
    reject_y = base + 16
    speeds = [p.speedup for p in points if p.speedup is not None and p.speedup > 0]
    low, high = (min([*speeds, 1.0]), max([*speeds, 1.0])) if speeds else (0.5, 2.0)
    use_log = high / low > 8
    if use_log:
        low, high = log_floor(low * 0.9), high * 1.3
        ticks = log_ticks(low, high)

        def y(v: float) -> float:
            return base - plot_h * (math.log(v) - math.log(low)) / (math.log(high) - math.log(low))
    else:
        ticks = nice_ticks(high * 1.1)
        high = ticks[-1]

        def y(v: float) -> float:
            return base - plot_h * v / high

    body: list[str] = []
    for t in ticks:
        body.append(f'<line x1="{xs.left}" y1="{y(t):.1f}" x2="{xs.right}" y2="{y(t):.1f}" stroke="#eee"/>')
        body.append(text(xs.left - 6, y(t) + 4, tick_label(t), "end", 'fill="#555"'))
    body.append(
        f'<line x1="{xs.left}" y1="{y(1.0):.1f}" x2="{xs.right}" y2="{y(1.0):.1f}" stroke="#000" '
        f'stroke-dasharray="4 3"/>'
    )
    body.append(text(xs.right + 4, y(1.0) + 4, "torch", extra='fill="#000"'))
    scale = ", log scale" if use_log else ""
    body.append(
        text(
            16,
            top + plot_h / 2,
            f"speedup (x vs torch{scale})",
            "middle",
            f'transform="rotate(-90 16 {top + plot_h / 2:.0f})" fill="#333"',
        )
    )
    body.append(text(xs.left - 6, reject_y + 4, "rejected", "end", 'fill="#c62828"'))
    body += _draft_lines(points, xs, top, reject_y)
    best, steps = None, []
    for p in points:
        if p.verdict == "KEEP" and p.speedup:
            if best is not None:
                steps.append(f"{xs(p.index):.1f},{y(best):.1f}")
            best = p.speedup
        if best is not None:
            steps.append(f"{xs(p.index):.1f},{y(best):.1f}")
    if steps:
        body.append(
            f'<polyline points="{" ".join(steps)}" fill="none" stroke="#2e7d32" stroke-width="1.5" '
            f'stroke-dasharray="6 3" opacity="0.7"/>'
        )
    colours = {a: AGENT_COLOURS[i % len(AGENT_COLOURS)] for i, a in enumerate(agents)}
    for agent in agents:
        line = [f"{xs(p.index):.1f},{y(p.speedup):.1f}" for p in points if p.agent == agent and p.speedup]
        if len(line) > 1:
            body.append(
                f'<polyline points="{" ".join(line)}" fill="none" stroke="{colours[agent]}" '
                f'stroke-width="1.5" opacity="0.8"/>'
            )
    for p in points:
        py = y(p.speedup) if p.speedup else reject_y
        body.append(marker(p.verdict, xs(p.index), py, tip(p)))
    body += xs.axis(reject_y + 14)
    items = [(f"agent {a}", colours[a], "line") for a in agents] + [("best so far", "#2e7d32", "dash")]
    items += [(v, "", v) for v in VERDICT_COLOURS]
    if any(p.drafting for p in points):
        items.append(("drafting starts", DRAFT_COLOUR, "draft"))
    body.insert(0, legend(xs.left, 16, items))
    return svg(width, reject_y + 56, body, title)


def _draft_lines(points: Sequence[Point], xs: XScale, top: float, bottom: float) -> list[str]:
    """A dotted vertical line where an agent starts drafting, labelled with the agent."""
    out: list[str] = []
    drafting: dict[str, bool] = {}
    last_label = -1e9
    for p in points:
        if p.drafting and not drafting.get(p.agent):
            x = xs(p.index) - 0.5 * (xs(2) - xs(1) if xs.count > 1 else 0)
            out.append(
                f'<line x1="{x:.1f}" y1="{top - 8}" x2="{x:.1f}" y2="{bottom + 6}" stroke="{DRAFT_COLOUR}" '
                f'stroke-dasharray="2 3" stroke-width="1.5"><title>{esc(p.agent)} drafts from attempt '
                f"#{p.index}</title></line>"
            )
            label = f"{p.agent} drafts"
            if x - last_label > CHAR_W * len(label) + 4:
                out.append(text(x + 3, top - 10, label, extra=f'fill="{DRAFT_COLOUR}"'))
                last_label = x
        drafting[p.agent] = p.drafting
    return out


# -- memory growth ----------------------------------------------------------------------
def growth(series: Sequence[tuple[float, int]], title: str, width: int = 760) -> str:
    """Experiences in the store over a run's time: a step line with a dot per new experience."""
    left, right, top, plot_h = 64, width - 30, 20, 160
    base = top + plot_h
    span = max((t for t, _ in series), default=0.0)
    minutes = span >= 120
    unit = 60.0 if minutes else 1.0
    xticks = nice_ticks(span / unit if span > 0 else 1.0)
    counts = [c for _, c in series]
    yticks = nice_ticks(max([*counts, 1]), 4)

    def x(t: float) -> float:
        return left + (right - left) * (t / unit) / xticks[-1]

    def y(c: float) -> float:
        return base - plot_h * c / yticks[-1]

    body = []
    for t in yticks:
        body.append(f'<line x1="{left}" y1="{y(t):.1f}" x2="{right}" y2="{y(t):.1f}" stroke="#eee"/>')
        body.append(text(left - 6, y(t) + 4, tick_label(t), "end", 'fill="#555"'))
    for t in xticks:
        body.append(text(x(t * unit), base + 16, tick_label(t), "middle", 'fill="#555"'))
    body.append(f'<line x1="{left}" y1="{base}" x2="{right}" y2="{base}" stroke="#999"/>')
    body.append(
        text(
            (left + right) / 2,
            base + 34,
            f"{'minutes' if minutes else 'seconds'} since the run started",
            "middle",
            'fill="#333"',
        )
    )
    body.append(
        text(
            16,
            top + plot_h / 2,
            "experiences in store",
            "middle",
            f'transform="rotate(-90 16 {top + plot_h / 2:.0f})" fill="#333"',
        )
    )
    steps, previous = [], None
    for t, c in series:
        if previous is not None:
            steps.append(f"{x(t):.1f},{y(previous):.1f}")
        steps.append(f"{x(t):.1f},{y(c):.1f}")
        previous = c
    if steps:
        body.append(f'<polyline points="{" ".join(steps)}" fill="none" stroke="#1565c0" stroke-width="2"/>')
    for i, (t, c) in enumerate(series):
        if i and c > series[i - 1][1]:
            body.append(
                f'<circle cx="{x(t):.1f}" cy="{y(c):.1f}" r="3" fill="#1565c0"><title>{c} experiences '
                f"at {t / unit:.1f} {'min' if minutes else 's'}</title></circle>"
            )
    return svg(width, base + 44, body, title)
