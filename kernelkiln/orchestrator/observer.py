"""What the orchestrator reports as it works (the CLI draws progress bars from it)."""

from __future__ import annotations

from kernelkiln.memory.callbacks import AttemptResult
from kernelkiln.store.records import Attempt


class Observer:
    """Progress callbacks; the default ignores them. Called from agent threads."""

    def seeded(self, task_id: str, origin: str) -> None:
        """What the task's agents start from: a seed file, the generated candidate, or nothing."""

    def task_started(self, task_id: str, budget: int, done: int, agents: list[str]) -> None:
        """Work on a task begins (``done`` evaluations were made before a resume)."""

    def evaluating(self, task_id: str, agent: str, summary: str) -> None:
        """An agent's candidate goes to the guard."""

    def after_verdict(self, result: AttemptResult) -> None:
        """A candidate was judged and stored (a VerdictCallback, after memory's)."""

    def confirming(self, task_id: str, seconds: float) -> None:
        """The task's best is being judged again, timing for ``seconds``."""

    def task_finished(self, task_id: str, incumbent: Attempt | None) -> None:
        """Work on a task ended."""

    def model_waiting(self, task_id: str, agent: str, since: float | None) -> None:
        """``agent``'s request to its model is in flight since ``since`` (``time.monotonic()``); None: it ended."""

    def note(self, line: str) -> None:
        """A line about the run itself (the cluster it joined, a device that died)."""

    def close(self) -> None:
        """The run is over (or interrupted): release the display."""
