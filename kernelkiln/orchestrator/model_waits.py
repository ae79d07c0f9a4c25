"""What an agent's model requests tell the run while they wait: lines, the progress display, the record.

Each llm agent's client gets an ``AgentWaits``: its lines about long waits and retries after a
timeout go to the observer (stderr) with the task and agent in front, the observer learns
since when the agent waits (a terminal draws a spinner), and each try given up on the
client's timeout is counted for the task in the run's ``UnconfirmedLedger``, which the run
keeps in its state and run.json reports apart from the tokens the server confirmed.
"""

from __future__ import annotations

import threading

from kernelkiln.orchestrator.observer import Observer
from kernelkiln.store.records import Unconfirmed


class UnconfirmedLedger:
    """The run's requests given up on a timeout, by task (thread-safe); starts from what the run had recorded."""

    def __init__(self, recorded: dict[str, Unconfirmed] | None = None) -> None:
        self._counts = dict(recorded or {})
        self._lock = threading.Lock()

    def add(self, task_id: str, prompt_tokens: int) -> None:
        with self._lock:
            self._counts[task_id] = self._counts.get(task_id, Unconfirmed()).plus(prompt_tokens)

    def snapshot(self) -> dict[str, Unconfirmed]:
        """The counts so far, by task."""
        with self._lock:
            return dict(self._counts)


class AgentWaits:
    """The ``WaitListener`` of one agent's client on one task."""

    def __init__(self, observer: Observer, ledger: UnconfirmedLedger, task_id: str, agent: str) -> None:
        self.observer, self.ledger = observer, ledger
        self.task_id, self.agent = task_id, agent

    def say(self, line: str) -> None:
        self.observer.note(f"kiln: {self.task_id} {self.agent}: {line}")

    def waiting(self, since: float | None) -> None:
        self.observer.model_waiting(self.task_id, self.agent, since)

    def abandoned(self, prompt_tokens: int) -> None:
        self.ledger.add(self.task_id, prompt_tokens)
