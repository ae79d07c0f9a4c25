"""The attempt graph of a task as SVG: attempts left to right in judged order, branches in lanes.

A child continues its parent's lane when it is the parent's first child; a later child
(a branch) takes the lowest lane free from its parent's position to its own, so edges
never run through a node. Node colour and shape give the verdict; the path from a root
to the task's best is drawn thick and gold.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernelkiln.report.format import fmt_x
from kernelkiln.report.records import Point
from kernelkiln.report.svg import XScale, esc, marker, svg, text, tip

BEST_COLOUR = "#f9a825"
ROW_H = 18


def lanes(points: Sequence[Point]) -> dict[str, int]:
    """Each attempt's lane (0 at the top)."""
    by_id = {p.id: p for p in points}
    children: dict[str, list[Point]] = {}
    for p in points:
        parent = _parent(p, by_id)
        if parent is not None:
            children.setdefault(parent.id, []).append(p)
    lane: dict[str, int] = {}
    reserved: list[int] = []  # per lane: the last attempt index it is held to
    for p in points:
        parent = _parent(p, by_id)
        if parent is not None and children[parent.id][0] is p:
            chosen = lane[parent.id]
        else:
            start = parent.index if parent is not None else p.index
            chosen = next((i for i, until in enumerate(reserved) if until < start), len(reserved))
            if chosen == len(reserved):
                reserved.append(0)
        lane[p.id] = chosen
        first = children.get(p.id)
        reserved[chosen] = max(p.index, first[0].index if first else p.index)
    return lane


def _parent(p: Point, by_id: dict[str, Point]) -> Point | None:
    """The parent within these points, when it was judged earlier (anything else counts as a root)."""
    parent = by_id.get(p.parent_id) if p.parent_id else None
    return parent if parent is not None and parent.index < p.index else None


def attempt_graph(points: Sequence[Point], best_path: Sequence[str], title: str, width: int = 940) -> str:
    """The task's attempts and parent→child edges; the best path highlighted."""
    xs = XScale(len(points), 64, width - 40)
    by_id = {p.id: p for p in points}
    lane = lanes(points)
    top = 34
    count = max(lane.values(), default=0) + 1

    def y(p: Point) -> float:
        return top + lane[p.id] * ROW_H

    on_path = set(best_path)
    edges, highlighted, nodes = [], [], []
    for p in points:
        parent = _parent(p, by_id)
        if parent is None:
            if p.parent_id:
                nodes.append(
                    f'<line x1="{xs(p.index) - 14:.1f}" y1="{y(p):.1f}" x2="{xs(p.index):.1f}" '
                    f'y2="{y(p):.1f}" stroke="#999" stroke-dasharray="2 2"><title>derived from '
                    f"{esc(p.parent_id)}, outside this run</title></line>"
                )
            continue
        d = f"M{xs(parent.index):.1f},{y(parent):.1f}L{xs(parent.index):.1f},{y(p):.1f}L{xs(p.index):.1f},{y(p):.1f}"
        if p.id in on_path and parent.id in on_path:
            highlighted.append(f'<path d="{d}" fill="none" stroke="{BEST_COLOUR}" stroke-width="4"/>')
        else:
            edges.append(f'<path d="{d}" fill="none" stroke="#b0b0b0" stroke-width="1.3"/>')
    for p in points:
        if p.id in on_path:
            nodes.append(
                f'<circle cx="{xs(p.index):.1f}" cy="{y(p):.1f}" r="8.5" fill="#fff" stroke="{BEST_COLOUR}" '
                f'stroke-width="3"/>'
            )
        nodes.append(marker(p.verdict, xs(p.index), y(p), tip(p)))
    body = edges + highlighted + nodes
    best = by_id.get(best_path[-1]) if best_path else None
    best_label = f"path to the best (#{best.index}, {fmt_x(best.speedup)} vs torch)" if best else "no best"
    bottom = top + (count - 1) * ROW_H + 14
    body += xs.axis(bottom)
    body.insert(
        0,
        f'<line x1="{xs.left}" y1="12" x2="{xs.left + 22}" y2="12" stroke="{BEST_COLOUR}" '
        f'stroke-width="4"/>'
        + text(xs.left + 28, 16, best_label, extra='fill="#333"')
        + f'<line x1="{xs.left + 310}" y1="12" x2="{xs.left + 332}" y2="12" stroke="#b0b0b0" '
        f'stroke-width="1.3"/>'
        + text(
            xs.left + 338, 16, "parent → child (derived from its code); branches take lanes below", extra='fill="#333"'
        ),
    )
    return svg(width, bottom + 44, body, title)
