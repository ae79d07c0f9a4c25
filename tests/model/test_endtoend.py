"""End to end: a shape whose timing could not be made clean gives no figure and keeps no kernel."""

from __future__ import annotations

import torch

from kernelkiln.model import endtoend, verify
from kernelkiln.model.shapes import Declared


def test_a_shape_timed_on_a_machine_too_busy_to_measure_runs_in_torch_and_says_why(monkeypatch):
    model = torch.nn.Linear(8, 8).eval()
    blind = verify.Timing({}, {}, {}, 0, (), 15, "only 0 of 15 timing rounds were clean")
    monkeypatch.setattr(verify, "time_arms", lambda arms: blind)
    shape = Declared("batch=4", (torch.randn(4, 8),), lambda: (torch.randn(4, 8),))
    end = endtoend._end_to_end(model, model, shape, compare_compile=False)
    assert end.correct and end.vs_eager is None and end.spliced_ms is None
    assert end.unmeasured == "only 0 of 15 timing rounds were clean" and end.disturbed == 15
    assert endtoend._dropped(end, "spliced") == (
        "the spliced model could not be timed end to end at batch=4: only 0 of 15 timing rounds were clean"
    )
