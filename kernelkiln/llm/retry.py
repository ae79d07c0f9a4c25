"""The retry loop both clients share: exponential backoff with full jitter, honouring Retry-After.

Retried: connection errors, timeouts, 408, 409, 429 and 5xx. Any other 4xx, and a reply the SDK
cannot read, fails at once; a 400 or 422 naming tools, on a request that offered some, is a
``ToolsRejected`` (the endpoint serves the model without function calling).
The SDKs' own retries are switched off (``max_retries=0``) so this is the only loop.
"""

from __future__ import annotations

import email.utils
import http
import json
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kernelkiln.llm.client import LLMError, ToolsRejected
from kernelkiln.llm.config import LLMConfig

T = TypeVar("T")

RETRYABLE_4XX = frozenset({408, 409, 429})
DETAIL_CHARS = 200
TOOLS_REJECTED_STATUSES = frozenset({400, 422})
# vLLM: '"auto" tool choice requires --enable-auto-tool-choice'; Ollama: 'm does not support tools';
# llama.cpp: 'tools param requires --jinja flag'; others name `functions` or `tool_choice`.
_NAMES_TOOLS = re.compile(r"tool|function", re.IGNORECASE)


@dataclass(frozen=True)
class Failure:
    """One failed try, as the loop needs it: a keyless one-line description and whether to try again."""

    what: str  # e.g. "503 Service Unavailable" or "timed out after 120 s"
    retryable: bool
    retry_after_s: float | None = None  # what the server asked for, if anything
    status: int | None = field(default=None, compare=False)  # the HTTP status, when there was one
    timed_out: bool = field(default=False, compare=False)  # the client stopped waiting (the server may go on)

    def rejects_tools(self) -> bool:
        """Whether this is an endpoint refusing the ``tools`` parameter (as servers without tool calling do)."""
        return self.status in TOOLS_REJECTED_STATUSES and bool(_NAMES_TOOLS.search(self.what))


def is_retryable_status(status: int) -> bool:
    return status >= 500 or status in RETRYABLE_4XX


def retry_after_s(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds a server asked us to wait (``retry-after-ms``, or ``Retry-After`` in seconds or as a date)."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        if "retry-after-ms" in lowered:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000)
        value = lowered.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value).timestamp()
            return max(0.0, when - (time.time() if now is None else now))
    except (TypeError, ValueError, OverflowError):
        return None


def backoff_s(retry: int, config: LLMConfig, rng: random.Random) -> float:
    """Full jitter: uniform in [0, min(cap, first * 2**retry)], ``retry`` counting from 0."""
    return rng.uniform(0.0, min(config.max_backoff_s, config.backoff_s * 2**retry))


def one_line(text: str, secrets: tuple[str, ...] = (), limit: int = DETAIL_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters, with every secret blanked out."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def status_failure(
    status: int, headers: Mapping[str, str] | None = None, detail: str = "", secrets: tuple[str, ...] = ()
) -> Failure:
    """The Failure for an HTTP error status; ``detail`` is the server's own message, if it gave one."""
    try:
        what = f"{status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        what = str(status)
    if detail:
        what += f": {one_line(detail, secrets)}"
    return Failure(what, is_retryable_status(status), retry_after_s(headers), status)


def classify_sdk_error(exc: BaseException, sdk: Any, timeout_s: float, secrets: tuple[str, ...] = ()) -> Failure | None:
    """The Failure for an exception of the openai or anthropic SDK (both share these classes); None: not ours."""
    if isinstance(exc, sdk.APITimeoutError):
        return Failure(f"timed out after {timeout_s:g} s", retryable=True, timed_out=True)
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f"{type(cause).__name__}: {cause}" if cause else str(exc)
        return Failure(f"connection failed ({one_line(detail, secrets)})", retryable=True)
    if isinstance(exc, sdk.APIStatusError):
        return status_failure(exc.status_code, exc.response.headers, _server_message(exc.body), secrets)
    if isinstance(exc, sdk.APIError | json.JSONDecodeError):  # e.g. a proxy's HTML page with status 200
        return Failure(f"unreadable reply ({one_line(str(exc), secrets)})", retryable=False)
    return None


def _server_message(body: object) -> str:
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, Mapping) else inner
        return message if isinstance(message, str) else ""
    return body if isinstance(body, str) else ""


def call_with_retries(
    call: Callable[[], T],
    classify: Callable[[BaseException], Failure | None],
    *,
    config: LLMConfig,
    endpoint: str,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    tools_sent: bool = False,
    say: Callable[[str], None] | None = None,
) -> tuple[T, int]:
    """``call()``'s result and the tries it took; LLMError when it fails for good.

    ``classify`` maps an exception to a Failure, or to None for exceptions that are not
    the endpoint's fault (those propagate unchanged). ``tools_sent``: the request offered
    tools, so a refusal naming them is a ``ToolsRejected``. ``say`` hears one line before
    each retry after a timeout (a silent retry would hide minutes of waiting).
    """
    rng = rng or random.Random()
    tries = config.max_retries + 1
    for attempt in range(1, tries + 1):
        try:
            return call(), attempt
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            # from None: the SDK's exception carries the request, which has no place in a one-line error
            if not failure.retryable:
                if tools_sent and failure.rejects_tools():
                    raise ToolsRejected(
                        f"llm endpoint {endpoint} rejected tool calls: {failure.what}", failure.what
                    ) from None
                raise LLMError(f"llm endpoint {endpoint} failed: {failure.what}") from None
            if attempt == tries:
                noun = "try" if tries == 1 else "tries"
                raise LLMError(f"llm endpoint {endpoint} failed after {tries} {noun}: {failure.what}") from None
            if failure.retry_after_s is not None:
                delay = min(failure.retry_after_s, config.max_backoff_s)
            else:
                delay = backoff_s(attempt - 1, config, rng)
            if failure.timed_out and say is not None:
                say(
                    f"llm endpoint {endpoint} did not answer within the {config.timeout_s:g} s timeout "
                    f"(try {attempt} of {tries}): asking again in {delay:.0f} s; the server may still be working "
                    "on the request given up (--set-config policy.llm.timeout_s=SECONDS waits longer)"
                )
            sleep(delay)
    raise AssertionError("unreachable")  # the loop returns or raises on its last try
