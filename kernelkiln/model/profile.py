"""Where a captured model's time goes: each node timed as the graph runs at the example inputs.

The graph runs node by node (``torch.fx.Interpreter``) a few times after a warm-up; a
node's time is its median. A region's share is its nodes' sum over the whole graph's. The
per-node Python overhead (a few microseconds) is in every figure alike, so shares of
small regions are high by that much. The same run records each value's spread, which the
task files draw their random inputs and weights with.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from kernelkiln.model.capture import Captured
from kernelkiln.model.taskfile import Spread


@dataclass(frozen=True)
class Profile:
    """Median seconds per node, the graph's total, and each tensor value's spread (by node name)."""

    seconds: dict[str, float]
    total: float
    spreads: dict[str, Spread]

    def share(self, nodes: tuple[fx.Node, ...]) -> float:
        return sum(self.seconds.get(n.name, 0.0) for n in nodes) / self.total if self.total else 0.0


class _Timed(fx.Interpreter):
    def __init__(self, gm: fx.GraphModule, keep: bool):
        super().__init__(gm, garbage_collect_values=not keep)
        self.times: dict[str, float] = {}
        self.keep = keep
        self.values: dict[str, Any] = {}

    def run_node(self, n: fx.Node) -> Any:
        start = time.perf_counter()
        value = super().run_node(n)
        self.times[n.name] = time.perf_counter() - start
        if self.keep and isinstance(value, torch.Tensor):
            self.values[n.name] = value
        return value


def profile(captured: Captured, model: torch.nn.Module, repeats: int = 5) -> Profile:
    """Time ``captured``'s nodes at its example inputs (the model's own weights); record value spreads."""
    state = captured.state_tensors(model)
    flat = [state[n.name] if n.name in state else None for n in captured.graph.nodes if n.op == "placeholder"]
    inputs = iter(torch.utils._pytree.tree_leaves(captured.example))
    args = [t if t is not None else next(inputs) for t in flat]
    gm = captured.module
    runs: list[dict[str, float]] = []
    with torch.no_grad():
        for k in range(repeats + 1):
            timed = _Timed(gm, keep=k == 0)
            timed.run(*args)
            if k == 0:
                spreads = {name: Spread.of(v) for name, v in timed.values.items()}
            else:
                runs.append(timed.times)
    seconds = {name: statistics.median(r.get(name, 0.0) for r in runs) for name in runs[0]}
    body = [n.name for n in captured.graph.nodes if n.op == "call_function"]
    return Profile(seconds, sum(seconds[name] for name in body), spreads)
