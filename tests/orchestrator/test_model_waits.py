"""A run against a model that answers late: the retry after a timeout is said on the run's observer with
the task and agent, the agent's wait is shown while it lasts, and the request given up is counted apart."""

from __future__ import annotations

from kernelkiln.memory.memory import Memory
from kernelkiln.orchestrator.config import OptimizeConfig
from kernelkiln.orchestrator.observer import Observer
from kernelkiln.orchestrator.run import Optimizer, TaskSpec
from kernelkiln.store import open_store
from kernelkiln.store.records import Unconfirmed
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.llm import LoopbackServer
from kernelkiln.testing.sessions.make import TINY, submits


class Heard(Observer):
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.waits: list[tuple[str, str, float | None]] = []

    def note(self, line: str) -> None:
        self.notes.append(line)

    def model_waiting(self, task_id: str, agent: str, since: float | None) -> None:
        self.waits.append((task_id, agent, since))


def test_a_try_given_up_on_the_timeout_is_said_shown_and_counted_as_unconfirmed(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    submit = submits()
    answered = {"prompt_tokens": 900, "completion_tokens": 50}
    script = [{"delay_s": 8, "text": "too late"}, lambda m, t: {**submit(m, t), **answered}]
    heard = Heard()
    url = f"sqlite:///{tmp_path / 'kiln.db'}"
    store = open_store(url)
    try:
        with LoopbackServer(script) as server:
            llm = {"model": "m", "base_url": server.base_url, "timeout_s": 2, "max_retries": 1, "backoff_s": 0}
            config = OptimizeConfig(
                policy={"kind": "llm", "llm": {**llm, "reply_protocol": "tools"}},
                budget=2,
                guard=fast_config(),
                confirm_time_budget_s=None,
            )
            result = Optimizer(Memory(store), tmp_path, heard).start([TaskSpec(str(TINY), {})], config, tmp_path / "o")
        with store.read() as conn:
            state = store.runs.get(conn, result.run_id).state
    finally:
        store.close()

    task = result.tasks["tiny_softmax"]
    assert task.attempts == 2  # the seed, then the model's candidate from the retry
    assert task.prompt_tokens == 900 and task.completion_tokens == 50  # what the server confirmed, alone
    estimated = task.unconfirmed_prompt_tokens
    assert task.unconfirmed_requests == 1 and estimated > 0
    assert (result.unconfirmed_requests, result.unconfirmed_prompt_tokens) == (1, estimated)
    assert state.unconfirmed == {"tiny_softmax": Unconfirmed(requests=1, prompt_tokens=estimated)}
    said = [n for n in heard.notes if "asking again" in n]
    assert len(said) == 1 and said[0].startswith(
        f"kiln: tiny_softmax a1: llm endpoint {server.base_url} did not answer within the 2 s timeout (try 1 of 2)"
    )
    ours = [since for task_id, agent, since in heard.waits if (task_id, agent) == ("tiny_softmax", "a1")]
    assert len(ours) == 2 and ours[0] is not None and ours[1] is None  # one request, shown while it waited
