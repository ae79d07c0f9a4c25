"""Progress on stderr while commands run: bars on a terminal, a line per judged attempt otherwise; Ctrl-C's exit."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from kernelkiln.orchestrator.observer import Observer


def with_progress(work, on_interrupt: str):
    """``work(observer, progress)`` with progress on stderr; Ctrl-C leaves (130) naming ``on_interrupt`` as next step.

    ``observer`` draws the optimizer's progress; ``progress(line)`` prints a plain dim line.
    """
    from kernelkiln.orchestrator.run import Interrupted

    err = Console(stderr=True)
    observer = progress_observer()
    try:
        return work(observer, lambda line: err.print(line, style="dim", markup=False, highlight=False))
    except (Interrupted, KeyboardInterrupt):  # within a run, or between a bench's or ablation's runs
        observer.close()
        exit_interrupted(on_interrupt)
    finally:
        observer.close()


def exit_interrupted(what_next: str) -> None:
    """Say the run was interrupted and what to do next, then leave at once with exit code 130.

    An abandoned evaluation's daemon thread may still be inside torch, and Python's
    finalization would stop it mid-C++ (pthread_exit) and abort the process; every store
    write is already committed, so nothing is lost by skipping finalization.
    """
    print(f"kiln: interrupted: {what_next}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


class _Lines(Observer):
    """One line per judged attempt on stderr (logs, pipes)."""

    def __init__(self) -> None:
        self.done: dict[str, int] = {}
        self.budget: dict[str, int] = {}

    def seeded(self, task_id, origin) -> None:
        print(f"{task_id}: starting from {origin}", file=sys.stderr, flush=True)

    def task_started(self, task_id, budget, done, agents) -> None:
        self.done[task_id], self.budget[task_id] = done, budget
        left, n = budget - done, len(agents)
        print(
            f"{task_id}: {n} agent{'' if n == 1 else 's'}, {left} evaluation{'' if left == 1 else 's'} to go",
            file=sys.stderr,
            flush=True,
        )

    def after_verdict(self, result) -> None:
        attempt, incumbent, task_id = result.attempt, result.incumbent, result.attempt.task_id
        self.done[task_id] += 1
        best = f"best {incumbent.speedup:.2f}x" if incumbent is not None and incumbent.speedup else "no best yet"
        got = f" {attempt.speedup:.2f}x" if attempt.speedup else f" ({attempt.case.reason[:80]})"
        print(
            f"[{task_id} {self.done[task_id]}/{self.budget[task_id]}] {attempt.agent} {attempt.verdict}{got}  "
            f"{attempt.summary}  | {best}",
            file=sys.stderr,
            flush=True,
        )

    def confirming(self, task_id, seconds) -> None:
        print(f"{task_id}: judging the best again, timing for {seconds:g} s", file=sys.stderr, flush=True)

    def note(self, line) -> None:
        print(line, file=sys.stderr, flush=True)


class ModelWaitColumn(ProgressColumn):
    """A spinner and the seconds the task's longest-waiting agent has waited for its model, while one waits."""

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"  # rich's "dots" spinner, drawn at its 80 ms a frame

    def render(self, task: Task) -> Text:
        waits: dict[str, float] = task.fields.get("waits") or {}
        if not waits:
            return Text("")
        agent, since = min(waits.items(), key=lambda item: item[1])
        frame = self.FRAMES[int(time.monotonic() * 12.5) % len(self.FRAMES)]
        return Text(f"{frame} {agent} waiting for the model {time.monotonic() - since:.0f} s", style="cyan")


class _Bars(Observer):
    """A rich progress bar per task on a terminal, with a spinner while an agent waits for its model."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[note]}"),
            ModelWaitColumn(),
            console=console,
        )
        self.ids: dict[str, Any] = {}
        self.waits: dict[str, dict[str, float]] = {}  # by task: each waiting agent's request began
        self.lock = threading.Lock()

    def seeded(self, task_id, origin) -> None:
        self.progress.console.print(f"{task_id}: starting from {origin}", style="dim")

    def task_started(self, task_id, budget, done, agents) -> None:
        if not self.ids:
            self.progress.start()
        self.ids[task_id] = self.progress.add_task(task_id, total=budget, completed=done, note="")

    def evaluating(self, task_id, agent, summary) -> None:
        self.progress.update(self.ids[task_id], note=f"{agent}: {summary[:60]}")

    def after_verdict(self, result) -> None:
        incumbent, task_id = result.incumbent, result.attempt.task_id
        best = f"best {incumbent.speedup:.2f}x" if incumbent is not None and incumbent.speedup else ""
        self.progress.update(self.ids[task_id], advance=1, description=f"{task_id} {best}")

    def confirming(self, task_id, seconds) -> None:
        self.progress.update(self.ids[task_id], note=f"judging the best again ({seconds:g} s)")

    def model_waiting(self, task_id, agent, since) -> None:
        with self.lock:
            waits = self.waits.setdefault(task_id, {})
            if since is None:
                waits.pop(agent, None)
            else:
                waits[agent] = since
            if task_id in self.ids:
                self.progress.update(self.ids[task_id], waits=dict(waits))

    def task_finished(self, task_id, incumbent) -> None:
        self.progress.update(self.ids[task_id], note="done")

    def note(self, line) -> None:
        self.progress.console.print(line, style="dim", markup=False, highlight=False)

    def close(self) -> None:
        if self.ids:
            self.progress.stop()
            self.ids = {}


def progress_observer() -> Observer:
    """Bars on a terminal, one line per judged attempt otherwise (both on stderr)."""
    console = Console(stderr=True)
    return _Bars(console) if console.is_terminal else _Lines()
