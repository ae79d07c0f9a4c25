"""Progress on stderr: a spinner with the seconds waited while an agent waits for its model (terminals only)."""

from __future__ import annotations

import io
import time

from rich.console import Console

from kernelkiln.cli.progress import ModelWaitColumn, _Bars, _Lines


def test_a_terminal_shows_a_spinner_and_the_wait_of_an_agent_waiting_for_its_model():
    bars = _Bars(Console(file=io.StringIO(), force_terminal=True, width=160))
    try:
        bars.task_started("t", 5, 0, ["a1", "a2"])
        task = bars.progress.tasks[0]
        column = ModelWaitColumn()
        assert column.render(task).plain == ""
        bars.model_waiting("t", "a2", time.monotonic() - 40)
        bars.model_waiting("t", "a1", time.monotonic())
        shown = column.render(bars.progress.tasks[0]).plain
        assert shown[0] in ModelWaitColumn.FRAMES and " a2 waiting for the model " in shown  # the longest wait
        bars.model_waiting("t", "a2", None)
        bars.model_waiting("t", "a1", None)
        assert column.render(bars.progress.tasks[0]).plain == ""
    finally:
        bars.close()


def test_without_a_terminal_a_wait_draws_nothing(capsys):
    lines = _Lines()
    lines.model_waiting("t", "a1", time.monotonic())
    lines.model_waiting("t", "a1", None)
    assert capsys.readouterr() == ("", "")
