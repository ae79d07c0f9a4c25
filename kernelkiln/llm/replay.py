"""``--policy replay --replay DIR``: a ChatClient that answers from a recorded session, offline.

Like SWE-agent's ReplayModel it plays a recording's replies back in order, one stream per
(task, agent), so each agent of a multi-agent run gets its own replies whatever the thread
interleaving. Unlike it, each request is first compared with the recorded one, and a replay
whose prompts have left the recording stops with one line naming the exchange and the first
differing message.

What "diverge" compares (``difference``): the run's measurements, ids and memory legitimately
vary between two runs of the same task (timings, speedups, attempt and experience ids, what
retrieval finds in a store that grew), so only what defines the task and the protocol must match:

- the conversation's shape: the number of messages and each one's role, the tools offered
  (names, descriptions, schemas) and the reply's token cap;
- every system message, exactly (whitespace aside): the instructions and the platform;
- the first section of the first user message (up to its second ``## `` heading: the task,
  its reference source and workloads), exactly (whitespace aside);
- later user messages (re-asks), with ids and numbers masked;
- assistant messages are the recording's own replies, and tool results carry live
  measurements: their roles (and tool names) are compared, not their text.

A request at a turn's start (no assistant message yet) that finds its stream used up raises
``RecordingEnded``: the recorded agent made no more turns, and the replay policy stops that
agent. Anywhere else an exhausted stream is a divergence.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelkiln.llm.client import LLMError
from kernelkiln.llm.config import LLMConfig
from kernelkiln.llm.messages import Completion, Message, ToolSpec
from kernelkiln.llm.session import (
    Exchange,
    Request,
    read_header,
    read_stream,
    recorded_tasks,
    task_dir,
)

_ID = re.compile(r"\b[a-z]{1,2}-[0-9a-f]{6,}\b|\bcall_\w+")  # attempt a-3f9c…, experience e-…, run r-…, tool call ids
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_SNIPPET = 70


class ReplayDiverged(LLMError):
    """The run's request is not the one recorded at this point of the stream."""


class RecordingEnded(LLMError):
    """The stream has no more exchanges and the request starts a new turn: the recorded agent stopped here."""


class ReplayClient:
    """Answers ``agent``'s calls on ``task_id`` with the replies recorded in ``directory``, in order."""

    def __init__(self, directory: Path | str, *, task_id: str, agent: str) -> None:
        self.directory = Path(directory)
        self.header = read_header(self.directory)
        self.task_id, self.agent = task_id, agent
        if not task_dir(self.directory, task_id).is_dir():
            held = ", ".join(recorded_tasks(self.directory)) or "none"
            raise ReplayDiverged(f"the session in {self.directory} recorded no task {task_id} (it holds: {held})")
        self.exchanges: list[Exchange] = read_stream(self.directory, task_id, agent)
        self._next = 0
        self._lock = threading.Lock()

    @property
    def llm(self) -> LLMConfig:
        """The recorded run's model settings (its window and reply cap shape the prompts)."""
        return self.header.llm

    @property
    def remaining(self) -> int:
        return len(self.exchanges) - self._next

    def skip_to(self, used: int) -> None:
        """Count the first ``used`` exchanges as played (a resumed run made them before it stopped)."""
        with self._lock:
            self._next = max(self._next, min(used, len(self.exchanges)))

    def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), max_tokens: int | None = None
    ) -> Completion:
        """The recorded reply to this request; ReplayDiverged when the request is not the recorded one."""
        where = f"{self.agent} on {self.task_id}"
        with self._lock:
            number = self._next + 1
            if self._next >= len(self.exchanges):
                if not any(m.role == "assistant" for m in messages):
                    raise RecordingEnded(f"the recording of {where} ends after exchange {len(self.exchanges)}")
                raise ReplayDiverged(
                    f"replay of {self.directory} diverged at exchange {number} of {where}: "
                    f"the run asked again mid-turn, but the recording ends at exchange "
                    f"{len(self.exchanges)}"
                )
            exchange = self.exchanges[self._next]
            self._next += 1
        sent = Request(messages=tuple(messages), tools=tuple(tools), max_tokens=max_tokens)
        found = difference(exchange.request, sent)
        if found:
            raise ReplayDiverged(f"replay of {self.directory} diverged at exchange {number} of {where}: {found}")
        if exchange.response is None:
            raise _recorded_error(exchange)
        return exchange.response


def difference(recorded: Request, sent: Request) -> str | None:
    """The first way ``sent`` differs from ``recorded`` under the rule in this module's docstring, or None."""
    if _specs(recorded.tools) != _specs(sent.tools):
        return (
            f"the tools offered differ: recorded [{', '.join(t.name for t in recorded.tools)}], "
            f"the run offered [{', '.join(t.name for t in sent.tools)}]"
        )
    if recorded.max_tokens != sent.max_tokens:
        return f"max_tokens was {recorded.max_tokens} in the recording, {sent.max_tokens} in the run"
    first_user = next((i for i, m in enumerate(sent.messages) if m.role == "user"), None)
    for i, (old, new) in enumerate(zip(recorded.messages, sent.messages, strict=False)):
        if old.role != new.role or (old.role == "tool" and old.name != new.name):
            return f"message {i} is {_kind(new)} in the run where the recording has {_kind(old)}"
        if old.role in ("assistant", "tool"):
            continue
        if old.role == "system":
            a, b = _spaces(old.content), _spaces(new.content)
        elif i == first_user:
            a, b = _spaces(_lead(old.content)), _spaces(_lead(new.content))
        else:
            a, b = _masked(old.content), _masked(new.content)
        if a != b:
            at = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            start = max(0, at - 20)
            return (
                f"message {i} ({old.role}) differs: recorded {a[start : start + _SNIPPET]!r}, "
                f"the run sent {b[start : start + _SNIPPET]!r}"
            )
    if len(recorded.messages) != len(sent.messages):
        return (
            f"the run sent {len(sent.messages)} messages where the recording has {len(recorded.messages)} "
            f"({' '.join(m.role for m in recorded.messages)})"
        )
    return None


def _specs(tools: Sequence[ToolSpec]) -> list[str]:
    return [t.model_dump_json() for t in tools]


def _kind(message: Message) -> str:
    article = "an" if message.role == "assistant" else "a"
    return f"{article} {message.role} message" + (
        f" ({message.name})" if message.role == "tool" and message.name else ""
    )


def _lead(text: str) -> str:
    """The first section of a prompt: up to its second Markdown ``## `` heading."""
    headings = [m.start() for m in re.finditer(r"(?m)^## ", text)]
    return text[: headings[1]] if len(headings) > 1 else text


def _spaces(text: str) -> str:
    return " ".join(text.split())


def _masked(text: str) -> str:
    return _NUMBER.sub("#", _ID.sub("<id>", _spaces(text)))


def _recorded_error(exchange: Exchange) -> LLMError:
    """The failure the recorded call ended in, as the same kind of LLMError where that kind takes one line."""
    kinds: dict[str, type[LLMError]] = {cls.__name__: cls for cls in _subclasses(LLMError)}
    kind = kinds.get(exchange.error_type or "", LLMError)
    try:
        return kind(exchange.error or "the recorded call failed")
    except TypeError:
        return LLMError(exchange.error or "the recorded call failed")


def _subclasses(cls: type[Any]) -> list[type[Any]]:
    out = [cls]
    for sub in cls.__subclasses__():
        out += _subclasses(sub)
    return out
