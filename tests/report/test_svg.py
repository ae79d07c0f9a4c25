"""The SVG charts: lanes of the attempt graph, scales, escaping."""

from __future__ import annotations

from kernelkiln.report.records import Point
from kernelkiln.report.svg import growth, hbars, log_floor, nice_ticks, trajectory
from kernelkiln.report.tree import attempt_graph, lanes


def point(index, parent=None, verdict="KEEP", speedup=1.0, agent="a1", objective="optimization", summary=""):
    return Point(
        index=index,
        id=f"p{index}",
        agent=agent,
        lens=None,
        verdict=verdict,
        speedup=speedup,
        objective=objective,
        parent_id=f"p{parent}" if parent else None,
        summary=summary,
    )


def test_a_first_child_continues_its_parents_lane_and_a_branch_takes_the_next_free_one():
    points = [point(1), point(2, 1), point(3, 1), point(4, 2), point(5, 3)]
    assert lanes(points) == {"p1": 0, "p2": 0, "p3": 1, "p4": 0, "p5": 1}


def test_a_lane_is_reused_once_nothing_holds_it():
    points = [point(1), point(2, 1), point(3, 1), point(4, 1), point(5, 2), point(6, 5)]
    # p3 (a dead end) frees lane 1 after attempt 3, so p4's branch from p1 cannot take it (it must span 1..4),
    # but nothing blocks a branch that starts after 3.
    placed = lanes(points)
    assert placed["p3"] == 1 and placed["p4"] == 2 and placed["p6"] == 0


def test_roots_and_parents_outside_the_points_start_their_own_lanes():
    points = [point(1), point(2, parent=99), point(3, 1)]
    assert lanes(points) == {"p1": 0, "p2": 1, "p3": 0}
    assert "outside this run" in attempt_graph(points, ["p1", "p3"], "graph")


def test_ticks_are_round_and_cover_the_values():
    assert nice_ticks(1.26) == [0, 0.5, 1.0, 1.5] and nice_ticks(1.2) == [0, 0.25, 0.5, 0.75, 1.0, 1.25]
    assert log_floor(0.034) == 0.02 and log_floor(7) == 5


def test_a_wide_range_of_speedups_is_drawn_on_a_log_scale_with_its_unit():
    wide = trajectory([point(1, speedup=0.02), point(2, 1, speedup=1.3)], ["a1"], "t")
    narrow = trajectory([point(1, speedup=0.8), point(2, 1, speedup=1.3)], ["a1"], "t")
    assert "x vs torch, log scale" in wide and "log scale" not in narrow and "x vs torch" in narrow


def test_rejects_sit_in_their_own_row_and_every_text_is_escaped():
    chart = trajectory([point(1), point(2, 1, verdict="REJECT", speedup=None, summary='<b a="x">')], ["a1"], "t")
    assert "rejected" in chart and '<b a="x">' not in chart and "&lt;b a=&quot;x&quot;&gt;" in chart
    bars = hbars([("<i>", [1.0])], [("best", "#000")], unit="x", title="<t>")
    assert "<i>" not in bars and "&lt;i&gt;" in bars


def test_degenerate_inputs_still_draw():
    lone = [point(1, verdict="REJECT", speedup=None)]
    assert "<svg" in trajectory(lone, ["a1"], "t") and "<svg" in attempt_graph(lone, [], "g")
    assert "no best" in attempt_graph(lone, [], "g")
    assert "<svg" in growth([(0.0, 0)], "m") and "<svg" in growth([], "m")
    assert "<svg" in hbars([("t", [None])], [("best", "#000")], unit="x", title="b")
