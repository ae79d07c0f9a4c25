"""The recorded-session format: what ``--record DIR`` writes and ``--policy replay --replay DIR`` reads.

A session directory holds ``session.json`` (a ``SessionHeader``: format version, the model's
``LLMConfig``, the run's settings) and one JSON-lines stream per conversation key, task and
agent: ``DIR/<task>/<agent>.jsonl``, one ``Exchange`` a line in the order the agent made its
calls. Keying by (task, agent) keeps each stream in one thread's order, so a multi-agent run
replays the same replies to the same agent however its threads interleave.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelkiln import __version__
from kernelkiln.llm.client import LLMError
from kernelkiln.llm.config import LLMConfig
from kernelkiln.llm.messages import Completion, Message, ToolSpec

FORMAT: Final = "kernelkiln-session"
VERSION = 1
HEADER = "session.json"

ReplyKind = Literal["tool", "text", "error"]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SessionHeader(_Record):
    """Once per session directory: which model the run talked to and how it was set up (no API key)."""

    format: Literal["kernelkiln-session"] = FORMAT
    version: int = VERSION
    kernelkiln: str = __version__
    created: str = Field(default_factory=lambda: now())
    llm: LLMConfig
    config: dict[str, Any] = Field(default_factory=dict)  # the run's configuration as JSON, for the record


class Request(_Record):
    """What the policy sent: the conversation so far, the tools on offer, the reply's token cap."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int | None = None


class Exchange(_Record):
    """One call to the model: the request, the reply (or the error it ended in), and how long it took."""

    number: int = Field(ge=1)  # 1-based, within its (task, agent) stream
    task_id: str
    agent: str
    at: str  # when the request was sent, ISO 8601 UTC
    latency_s: float
    reply: ReplyKind  # "tool": the reply called tools; "text": it did not; "error": the call failed
    request: Request
    response: Completion | None = None
    error: str | None = None  # the LLMError's one line
    error_type: str | None = None  # its class name, so a replay raises the same kind


def stream_path(directory: Path, task_id: str, agent: str) -> Path:
    """Where the stream of ``agent`` on ``task_id`` lives under ``directory``."""
    return directory / _safe(task_id) / f"{_safe(agent)}.jsonl"


def task_dir(directory: Path, task_id: str) -> Path:
    return directory / _safe(task_id)


def write_header(directory: Path, header: SessionHeader) -> None:
    """Create ``directory`` and its header; a header already there (a resumed run, a later task) is kept."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        with open(directory / HEADER, "x") as f:
            f.write(header.model_dump_json(indent=2) + "\n")
    except FileExistsError:
        read_header(directory)  # a directory of some other format or version is refused, not appended to


def read_header(directory: Path) -> SessionHeader:
    """The header of the session in ``directory``; LLMError when there is none or it is not this format."""
    path = directory / HEADER
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise LLMError(f"{directory} holds no recorded session (no {HEADER}); record one with --record DIR") from None
    except (OSError, ValueError) as exc:
        raise LLMError(f"{path}: cannot read it: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise LLMError(f"{path}: not a kernelkiln recorded session")
    if data.get("version") != VERSION:
        raise LLMError(
            f"{path}: recorded in session format version {data.get('version')}; this kernelkiln reads version {VERSION}"
        )
    try:
        return SessionHeader.model_validate(data)
    except ValidationError as exc:
        raise LLMError(f"{path}: {_first_error(exc)}") from None


def read_stream(directory: Path, task_id: str, agent: str) -> list[Exchange]:
    """The exchanges of ``agent`` on ``task_id``, in order (none when the agent never called the model)."""
    path = stream_path(directory, task_id, agent)
    if not path.exists():
        return []
    exchanges: list[Exchange] = []
    for line_no, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            exchange = Exchange.model_validate_json(line)
        except ValidationError as exc:
            raise LLMError(f"{path}:{line_no}: not a recorded exchange: {_first_error(exc)}") from None
        if (exchange.task_id, exchange.agent, exchange.number) != (task_id, agent, len(exchanges) + 1):
            raise LLMError(
                f"{path}:{line_no}: expected exchange {len(exchanges) + 1} of {agent} on {task_id}, "
                f"found exchange {exchange.number} of {exchange.agent} on {exchange.task_id}"
            )
        exchanges.append(exchange)
    return exchanges


def recorded_tasks(directory: Path) -> list[str]:
    """The task directories of a session (as named on disk)."""
    return sorted(p.name for p in directory.iterdir() if p.is_dir()) if directory.is_dir() else []


def _safe(name: str) -> str:
    # Task ids carry their size overrides ("t[N=4]"); keep file names portable.
    return re.sub(r"[^A-Za-z0-9._=,+-]", "_", name) or "_"


def now() -> str:
    """The time now, ISO 8601 UTC to the millisecond."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    return f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"
