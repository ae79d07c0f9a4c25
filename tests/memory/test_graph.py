import pytest

from kernelkiln.memory.config import GraphConfig
from kernelkiln.memory.graph import ExperienceGraph
from kernelkiln.testing.memory_fakes import attempt


def _tree():
    root = attempt(speedup=1.0, created_at=1)
    a = attempt(speedup=1.5, parent=root, created_at=2)
    b = attempt(verdict="REJECT", parent=root, created_at=3)
    c = attempt(speedup=3.0, parent=a, created_at=4)
    return root, a, b, c


def test_relative_speedup():
    root, a, b, c = _tree()
    graph = ExperienceGraph([root, a, b, c])
    assert graph.relative_speedup(root.id) == 1.0  # a root
    assert graph.relative_speedup(a.id) == 1.5
    assert graph.relative_speedup(b.id) == 0.0  # failed
    assert graph.relative_speedup(c.id) == 2.0  # 3.0 / 1.5


def test_graph_score_by_hand():
    root, a, b, c = _tree()
    scores = ExperienceGraph([root, a, b, c]).scores()
    # d(c) = 2.0; d(b) = 0; d(a) = 1.5 + 0.5·0.9·2.0 = 2.4; d(root) = 1 + 0.45·(2.4 + 0) = 2.08
    assert scores[c.id] == pytest.approx(2.0)
    assert scores[b.id] == pytest.approx(0.0)
    assert scores[a.id] == pytest.approx(2.4)
    assert scores[root.id] == pytest.approx(2.08)


def test_graph_score_uses_configured_weights():
    root, a, b, c = _tree()
    scores = ExperienceGraph([root, a, b, c], GraphConfig(w_self=2.0, w_succ=1.0, gamma=0.5)).scores()
    # d(c) = 4; d(a) = 3 + 0.5·4 = 5; d(root) = 2 + 0.5·5 = 4.5
    assert scores[root.id] == pytest.approx(4.5)


def test_child_of_a_failed_node_compares_with_the_nearest_correct_ancestor():
    root, a, b, c = _tree()
    d = attempt(speedup=2.0, parent=b, created_at=5)
    graph = ExperienceGraph([root, a, b, c, d])
    assert graph.relative_speedup(d.id) == 2.0  # 2.0 / root's 1.0
    scores = graph.scores()
    assert scores[b.id] == pytest.approx(0.45 * 2.0)
    assert scores[root.id] == pytest.approx(1.0 + 0.45 * (2.4 + 0.9))


def test_failed_root_and_orphans():
    failed_root = attempt(verdict="REJECT")
    orphan = attempt(speedup=2.0, parent="a-not-stored")
    graph = ExperienceGraph([failed_root, orphan])
    assert graph.relative_speedup(failed_root.id) == 0.0
    assert graph.relative_speedup(orphan.id) == 1.0
    assert set(graph.roots) == {failed_root.id, orphan.id}


def test_best_path_and_ranking():
    root, a, b, c = _tree()
    graph = ExperienceGraph([root, a, b, c])
    assert graph.best().id == c.id
    assert graph.best_path() == [root.id, a.id, c.id]
    assert [n.id for n, _ in graph.ranked()] == [a.id, root.id, c.id, b.id]
    assert ExperienceGraph([attempt(verdict="REJECT")]).best_path() == []


def test_deep_chains_do_not_recurse():
    nodes = [attempt(speedup=1.0)]
    for _ in range(5000):
        nodes.append(attempt(speedup=1.0, parent=nodes[-1]))
    scores = ExperienceGraph(nodes).scores()
    # Each level adds 0.45 of the one below: d converges to 1 / (1 - 0.45).
    assert scores[nodes[0].id] == pytest.approx(1 / 0.55)
