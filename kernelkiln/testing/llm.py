"""Network-free LLM doubles: the scripted ChatClient (``kernelkiln.llm.scripted``, which the context
study uses too), and a loopback HTTP server that speaks enough of the
OpenAI chat-completions and Anthropic messages APIs for the official SDKs to run against it.

Both play a script of replies, one per call. A reply is a ``Completion``; a ``str`` (plain text); a dict
``{"text", "tool_calls": [{"name", "arguments", "id"?}], "prompt_tokens", "completion_tokens",
"finish_reason", "model"}`` (all optional; tokens not given are estimated from the prompt and the reply);
or a callable ``(messages, tools) -> reply``. The server also plays ``{"status": 500}`` or
``{"status": 429, "retry_after": 0}`` (an error reply), ``{"delay_s": x, ...}`` (answer late) and
``{"body": ...}`` (answer 200 with this body: a str verbatim, anything else as JSON). To the
scripted client, a ``{"status": ...}`` entry is an LLMError, as a real client raises once retries are spent.

Kinds of endpoint: a reply dict's ``"reasoning"`` is a reasoning model's (``reasoning_content`` on the
OpenAI wire, a signed ``thinking`` block on Anthropic's); ``text_reply(...)`` is what a model without
tool calling writes in the text protocol; ``LoopbackServer(..., reject_tools=True)`` answers every
request that offers tools with HTTP 400 as vLLM does without ``--enable-auto-tool-choice``;
``LoopbackServer(..., window=N)`` refuses a request too long for a window of N tokens as vLLM or
llama.cpp's server does (``refusal``), counting tokens at its own rate (``chars_per_token``).
"""

from __future__ import annotations

import itertools
import json
import math
import random
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Self

from kernelkiln.llm.messages import (
    Completion,
    Message,
    ToolCall,
    ToolSpec,
    estimate_prompt_tokens,
    parse_arguments,
)
from kernelkiln.llm.scripted import Reply, ScriptedClient, ScriptExhausted, to_completion  # noqa: F401 - the tests' names


class RecordedSleep:
    """A stand-in for ``time.sleep`` that returns at once and keeps every delay it was asked for."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class RecordedWaits:
    """A ``WaitListener`` that keeps what it hears: lines, each request's start and end (None), tries given up."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.spans: list[float | None] = []
        self.abandoned_tokens: list[int] = []

    def say(self, line: str) -> None:
        self.lines.append(line)

    def waiting(self, since: float | None) -> None:
        self.spans.append(since)

    def abandoned(self, prompt_tokens: int) -> None:
        self.abandoned_tokens.append(prompt_tokens)


class MaxJitter(random.Random):
    """An RNG whose ``uniform(a, b)`` is always ``b``, which makes jittered backoff predictable."""

    def uniform(self, a: float, b: float) -> float:
        return b


TOOLS_REJECTED = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
Refusal = Literal["vllm", "llama.cpp", "llama-cpp-python"]


def text_reply(
    code: str,
    summary: str = "text protocol candidate",
    adopted: Sequence[str] = (),
    not_adopted: Sequence[str] = (),
    prose: str = "Here is my candidate.",
) -> str:
    """A complete text-protocol reply: prose, one python block, a Summary line and the adoption JSON."""
    adoptions = {"adopted": list(adopted), "not_adopted": [{"id": i, "why": "does not apply"} for i in not_adopted]}
    return f"{prose}\n\n```python\n{code.strip()}\n```\n\nSummary: {summary}\n\n```json\n{json.dumps(adoptions)}\n```\n"


@dataclass(frozen=True)
class RouteError:
    """A route's answer that is an HTTP error (``routes={"GET /v1/models": RouteError(401, "bad key")}``)."""

    status: int
    message: str = ""


@dataclass(frozen=True)
class RecordedRequest:
    """One request the loopback server received."""

    path: str
    headers: dict[str, str]  # names in lower case
    body: dict[str, Any]


class LoopbackServer:
    """An HTTP server on 127.0.0.1 (a free port, a daemon thread) that plays ``script``; a context manager.

    ``base_url`` (…/v1) is for the OpenAI SDK; ``root_url`` is for the Anthropic SDK, which adds /v1 itself.
    ``routes`` answers other requests with fixed JSON, by "METHOD PATH" (e.g. "GET /v1/models"), or
    with an HTTP error (a ``RouteError``).
    ``reject_tools``: answer a request that offers tools with HTTP 400 (this message when a str),
    spending no script entry. ``window``: the model's context window; a chat request too long for it
    is answered HTTP 400 as ``refusal`` says, spending no script entry: "vllm" refuses a prompt plus
    its ``max_tokens`` above the window ("This model's maximum context length is …"), "llama.cpp" a
    prompt that alone fills it ("the request exceeds the available context size", with ``n_ctx``
    and ``n_prompt_tokens``), "llama-cpp-python" too ("Requested tokens (N) exceed context window of
    W"), and it serves a prompt that fits alone, cutting the reply where the window ends
    (``finish_reason`` "length", its tokens the window's rest, its tool calls lost).
    ``chars_per_token``: the server's own token count (of the messages' text and the tools' JSON)
    for that check and for the usage it reports where the script gives no ``prompt_tokens``; None
    counts as the clients estimate. Every request is kept in ``.requests``.
    """

    def __init__(
        self,
        script: Iterable[Reply | dict[str, Any]],
        routes: dict[str, Any] | None = None,
        reject_tools: bool | str = False,
        window: int | None = None,
        refusal: Refusal = "vllm",
        chars_per_token: float | None = None,
    ) -> None:
        self._script = deque(script)
        self.routes = dict(routes or {})
        self.reject_tools = TOOLS_REJECTED if reject_tools is True else reject_tools
        self.window, self.refusal, self.chars_per_token = window, refusal, chars_per_token
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._ids = itertools.count(1)  # tool calls without an id
        self._served = itertools.count(1)  # replies
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.loopback = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="llm-loopback", daemon=True
        )

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    @property
    def remaining(self) -> int:
        return len(self._script)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._closing.set()  # ends any scripted delay at once
        self._httpd.shutdown()
        self._httpd.server_close()

    def respond(
        self, path: str, headers: dict[str, str], body: dict[str, Any], method: str = "POST"
    ) -> tuple[int, dict[str, str], Any]:
        """Status, extra headers and body (JSON, or a str sent as is) answering one request (handler thread)."""
        wire = "anthropic" if path.endswith("/messages") else "openai" if path.endswith("/chat/completions") else ""
        with self._lock:
            self.requests.append(RecordedRequest(path, {k.lower(): v for k, v in headers.items()}, body))
            if f"{method} {path}" in self.routes:
                route = self.routes[f"{method} {path}"]
                if isinstance(route, RouteError):
                    return route.status, {}, _error_body("openai", "api_error", route.message)
                return 200, {}, route
            if wire and self.reject_tools and body.get("tools"):
                return 400, {}, _error_body(wire, "invalid_request_error", self.reject_tools)
            messages, tools = (
                (_from_anthropic(body) if wire == "anthropic" else _from_openai(body)) if wire else ([], [])
            )
            prompt = self._count(messages, tools)
            if wire and (refused := self._too_long(wire, prompt, body)) is not None:
                return 400, {}, refused
            entry = self._script.popleft() if self._script and wire else None
            served = len(self.requests)
        if not wire:
            return 404, {}, _error_body("openai", "not_found", f"the loopback server has no route {path}")
        if entry is None:
            message = f"loopback script exhausted: request {served} has no reply scripted"
            return 400, {}, _error_body(wire, "invalid_request_error", message)
        if isinstance(entry, dict) and "delay_s" in entry:
            self._closing.wait(entry["delay_s"])
            entry = {k: v for k, v in entry.items() if k != "delay_s"}
        if isinstance(entry, dict) and "status" in entry:
            status = int(entry["status"])
            extra = {"Retry-After": str(entry["retry_after"])} if "retry_after" in entry else {}
            message = entry.get("message", f"scripted error {status}")
            return status, extra, _error_body(wire, "rate_limit_error" if status == 429 else "api_error", message)
        if isinstance(entry, dict) and "body" in entry:
            return 200, {}, entry["body"]
        completion = to_completion(entry, messages, tools, model=body.get("model", ""), ids=self._ids)
        if self.chars_per_token and not (isinstance(entry, dict) and "prompt_tokens" in entry):
            completion = completion.model_copy(update={"prompt_tokens": prompt})
        asked = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        if self.refusal == "llama-cpp-python" and self.window is not None and prompt + asked > self.window:
            rest = self.window - prompt  # served, and cut where the window ends
            cut = {"text": (completion.text or "I will write")[: 3 * rest], "tool_calls": ()}
            usage = {"prompt_tokens": prompt, "completion_tokens": rest, "finish_reason": "length"}
            completion = completion.model_copy(update={**cut, **usage})
        number = next(self._served)
        return 200, {}, _to_anthropic(completion, number) if wire == "anthropic" else _to_openai(completion, number)

    def _count(self, messages: Sequence[Message], tools: Sequence[ToolSpec]) -> int:
        """The request's prompt tokens by this server's count."""
        if not self.chars_per_token:
            return estimate_prompt_tokens(messages, tools)
        text = "".join(m.content + "".join(c.name + json.dumps(c.arguments) for c in m.tool_calls) for m in messages)
        return math.ceil(len(text + "".join(t.model_dump_json() for t in tools)) / self.chars_per_token)

    def _too_long(self, wire: str, prompt: int, body: dict[str, Any]) -> dict[str, Any] | None:
        """The refusal of a request too long for ``window``, in the server's words; None when it fits."""
        if self.window is None:
            return None
        reply = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        if self.refusal == "llama-cpp-python":
            if prompt < self.window:
                return None
            message = f"Requested tokens ({prompt}) exceed context window of {self.window}"
            return _error_body(wire, "invalid_request_error", message)
        if self.refusal == "llama.cpp":
            if prompt < self.window:
                return None
            message = "the request exceeds the available context size, try increasing it"
            refused = _error_body(wire, "exceed_context_size_error", message)
            refused["error"].update(n_prompt_tokens=prompt, n_ctx=self.window)
            return refused
        if prompt + reply <= self.window:
            return None
        message = (
            f"This model's maximum context length is {self.window} tokens. However, you requested "
            f"{prompt + reply} tokens ({prompt} in the messages, {reply} in the completion). "
            "Please reduce the length of the messages or completion."
        )
        return _error_body(wire, "BadRequestError", message)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.do_POST()

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode(errors="replace")}
        loopback: LoopbackServer = self.server.loopback  # type: ignore[attr-defined]  # set by LoopbackServer
        status, extra, payload = loopback.respond(self.path, dict(self.headers.items()), body, self.command)
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        try:
            self.send_response(status)
            for name, value in extra.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a scripted timeout)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _error_body(wire: str, kind: str, message: str) -> dict[str, Any]:
    if wire == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": None}}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def _from_openai(body: dict[str, Any]) -> tuple[list[Message], list[ToolSpec]]:
    messages = []
    for m in body.get("messages", []):
        calls = tuple(
            ToolCall(id=c["id"], name=c["function"]["name"], arguments=parse_arguments(c["function"].get("arguments")))
            for c in m.get("tool_calls") or ()
        )
        role = "system" if m["role"] == "developer" else m["role"]
        content = _text(m.get("content"))
        messages.append(Message(role=role, content=content, tool_calls=calls, tool_call_id=m.get("tool_call_id")))
    tools = [
        ToolSpec(name=f["name"], description=f.get("description", ""), parameters=f.get("parameters") or {})
        for f in (t["function"] for t in body.get("tools") or ())
    ]
    return messages, tools


def _from_anthropic(body: dict[str, Any]) -> tuple[list[Message], list[ToolSpec]]:
    messages = [Message(role="system", content=_text(body["system"]))] if body.get("system") else []
    for turn in body.get("messages", []):
        blocks = turn["content"] if isinstance(turn["content"], list) else [{"type": "text", "text": turn["content"]}]
        texts, calls, thinking = [], [], []
        for block in blocks:
            if block["type"] == "tool_result":
                content = _text(block.get("content"))
                messages.append(Message(role="tool", content=content, tool_call_id=block["tool_use_id"]))
            elif block["type"] == "tool_use":
                calls.append(ToolCall(id=block["id"], name=block["name"], arguments=parse_arguments(block["input"])))
            elif block["type"] == "text":
                texts.append(block["text"])
            elif block["type"] == "thinking":
                thinking.append(block)
        if texts or calls:
            messages.append(
                Message(role=turn["role"], content="".join(texts), tool_calls=tuple(calls), thinking=tuple(thinking))
            )
    tools = [
        ToolSpec(name=t["name"], description=t.get("description", ""), parameters=t.get("input_schema") or {})
        for t in body.get("tools") or ()
    ]
    return messages, tools


def _wire_arguments(call: ToolCall) -> str:
    return call.arguments["_raw"] if call.malformed else json.dumps(call.arguments)


def _to_openai(c: Completion, number: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": c.text or (None if c.tool_calls else "")}
    if c.reasoning:
        message["reasoning_content"] = c.reasoning
    if c.tool_calls:
        message["tool_calls"] = [
            {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": _wire_arguments(t)}}
            for t in c.tool_calls
        ]
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": c.model,
        "choices": [{"index": 0, "message": message, "finish_reason": c.finish_reason or "stop", "logprobs": None}],
        "usage": {
            "prompt_tokens": c.prompt_tokens,
            "completion_tokens": c.completion_tokens,
            "total_tokens": c.total_tokens,
        },
    }


_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _to_anthropic(c: Completion, number: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = (
        [{"type": "thinking", "thinking": c.reasoning, "signature": f"sig-{number}"}] if c.reasoning else []
    )
    content += [{"type": "text", "text": c.text}] if c.text else []
    content += [{"type": "tool_use", "id": t.id, "name": t.name, "input": t.arguments} for t in c.tool_calls]
    return {
        "id": f"msg_{number}",
        "type": "message",
        "role": "assistant",
        "model": c.model,
        "content": content,
        "stop_reason": _STOP_REASONS.get(c.finish_reason, c.finish_reason or "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": c.prompt_tokens, "output_tokens": c.completion_tokens},
    }
