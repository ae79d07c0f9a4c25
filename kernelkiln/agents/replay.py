"""The replay policy: the llm policy answered by a recorded session instead of an endpoint.

What it adds to the llm policy:
- when an agent's recording ends at a turn's start (the recorded agent made no more turns,
  e.g. another agent took the budget's last evaluations first), the agent stops instead of
  failing the run, and the budget goes to the agents that still have turns;
- a resumed replay skips the exchanges its stored attempts already used (each attempt keeps
  its turn's model calls in ``case.calls``), so it goes on where it stopped.
"""

from __future__ import annotations

from kernelkiln.llm.replay import RecordingEnded, ReplayClient
from kernelkiln.policy.turn import GaveUp, Policy, Proposal, Turn
from kernelkiln.store.records import Attempt


class ReplayPolicy:
    """``inner`` (an LLMPolicy over ``client``), stopping when its recording ends."""

    name = "replay"
    layered = True

    def __init__(self, inner: Policy, client: ReplayClient) -> None:
        self.inner, self.client = inner, client
        self._observed_calls = 0

    def propose(self, turn: Turn) -> Proposal | GaveUp | None:
        try:
            return self.inner.propose(turn)
        except RecordingEnded:
            return None

    def observe(self, attempt: Attempt) -> None:
        self._observed_calls += len(attempt.case.calls)
        self.client.skip_to(self._observed_calls)  # a no-op unless resuming: live turns used them already
        self.inner.observe(attempt)
