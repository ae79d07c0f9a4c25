"""``--record DIR``: a ChatClient that saves every exchange with the model it wraps.

One ``RecordingClient`` per conversation stream (an agent on a task); each call appends one
``Exchange`` line to that stream's file as soon as the reply (or the failure) is in, so an
interrupted run keeps every exchange it made. Requests and replies are the provider-neutral
records, never HTTP: no header, and so no API key, reaches the file; the key's value is
also struck from every line in case an error message ever quoted it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kernelkiln.llm.client import ChatClient, LLMError
from kernelkiln.llm.messages import Completion, Message, ToolSpec
from kernelkiln.llm.session import (
    Exchange,
    Request,
    SessionHeader,
    now,
    read_stream,
    stream_path,
    write_header,
)

REDACTED = "[redacted]"
_MIN_SECRET = 8  # shorter "keys" (a local server's dummy EMPTY) are not secrets, and would mangle text
_LOCK = threading.Lock()  # appends and headers of every stream: one short write at a time


class RecordingClient:
    """Passes each call to ``inner`` and appends it, with its reply and latency, to the stream's file."""

    def __init__(
        self,
        inner: ChatClient,
        directory: Path | str,
        *,
        task_id: str,
        agent: str,
        header: SessionHeader,
        secrets: Iterable[str] = (),
    ) -> None:
        self.inner = inner
        self.directory = Path(directory)
        self.task_id, self.agent = task_id, agent
        self.path = stream_path(self.directory, task_id, agent)
        self._secrets = tuple(s for s in secrets if s and len(s) >= _MIN_SECRET)
        with _LOCK:
            write_header(self.directory, header)
            self.path.parent.mkdir(parents=True, exist_ok=True)  # the task is recorded even before its first call
            self._number = len(read_stream(self.directory, task_id, agent))  # a resumed run appends

    def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), max_tokens: int | None = None
    ) -> Completion:
        request = Request(messages=tuple(messages), tools=tuple(tools), max_tokens=max_tokens)
        at, started = now(), time.monotonic()
        try:
            reply = self.inner.complete(messages, tools, max_tokens=max_tokens)
        except LLMError as exc:
            self._append(request, at, time.monotonic() - started, error=exc)
            raise
        self._append(request, at, time.monotonic() - started, response=reply)
        return reply

    def __getattr__(self, name: str) -> Any:
        # Whatever else a policy asks of its client (its config, a protocol switch) is the inner client's.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _append(
        self,
        request: Request,
        at: str,
        latency: float,
        *,
        response: Completion | None = None,
        error: LLMError | None = None,
    ) -> None:
        with _LOCK:
            self._number += 1
            exchange = Exchange(
                number=self._number,
                task_id=self.task_id,
                agent=self.agent,
                at=at,
                latency_s=round(latency, 6),
                reply="error" if error else "tool" if response is not None and response.tool_calls else "text",
                request=request,
                response=response,
                error=str(error) if error else None,
                error_type=type(error).__name__ if error else None,
            )
            line = exchange.model_dump_json(exclude_none=True)
            for secret in self._secrets:
                line = line.replace(secret, REDACTED)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
