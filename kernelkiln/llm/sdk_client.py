"""What the SDK clients share: the key, the SDK's client object, the retry loop around each call, and
the fit of each request to the model's window (``fit``)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from kernelkiln.llm.client import resolve_api_key
from kernelkiln.llm.config import LLMConfig
from kernelkiln.llm.fit import WindowFit
from kernelkiln.llm.messages import Completion, Message, ToolSpec, estimate_prompt_tokens
from kernelkiln.llm.overflow import ContextExceeded, read_refusal
from kernelkiln.llm.retry import Failure, call_with_retries, classify_sdk_error, one_line
from kernelkiln.llm.waiting import FIRST_NOTICE_S, StderrWaits, WaitListener, watched

# One try's reply, and whether the server reported the prompt's tokens (else they are an estimate).
Sent = tuple[Completion, bool]


class SDKClient:
    """Base of ``OpenAIClient`` and ``AnthropicClient``: kernelkiln's retries, never the SDK's.

    ``waits`` hears about long waits (a line after ``notice_s`` seconds, then each time the wait
    doubles; default: stderr) and about tries abandoned on the timeout.
    """

    def __init__(
        self,
        config: LLMConfig,
        sdk: Any,
        factory: Callable[..., Any],
        *,
        sleep: Callable[[float], None],
        rng: random.Random | None,
        waits: WaitListener | None = None,
        notice_s: float = FIRST_NOTICE_S,
    ) -> None:
        self.config = config
        self._sdk = sdk
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._waits: WaitListener = waits or StderrWaits()
        self._notice_s = notice_s
        self._key = resolve_api_key(config)
        self._client = factory(base_url=config.base_url, api_key=self._key, timeout=config.timeout_s, max_retries=0)
        self.endpoint = str(self._client.base_url).rstrip("/")
        self.fit = WindowFit(config.context_window, self.endpoint)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.config.model!r}, endpoint={self.endpoint!r})"

    def _fitted(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], asked: int, send: Callable[[int, int], Sent]
    ) -> Completion:
        """``send(cap, estimate)``'s reply, the cap being what the window leaves of ``asked``; a refusal for length is
        learned from and the request sent again once (``WindowFit``)."""
        estimate = estimate_prompt_tokens(messages, tools)
        cap = self.fit.max_tokens(estimate, asked)
        try:
            reply, reported = send(cap, estimate)
        except ContextExceeded as refusal:
            cap = self.fit.refused(refusal, estimate, asked, cap)
            reply, reported = send(cap, estimate)
        if reported:
            self.fit.observe(estimate, reply.prompt_tokens)
            window = self.fit.cut(reply.prompt_tokens, reply.completion_tokens, reply.finish_reason, cap)
            if window is not None:
                reply = reply.model_copy(update={"window": window})
        return reply

    def _with_retries(
        self, create: Callable[[], Any], prompt_tokens: int, tools_sent: bool = False
    ) -> tuple[Any, int, float]:
        """``create()``'s response, the tries it took, and the seconds they took (waits included).

        ``prompt_tokens``: the request's prompt, estimated (what a try given up on the timeout
        may have cost); ``tools_sent``: the request offered tools (a refusal naming them raises
        ToolsRejected). A refusal naming the model's window raises ContextExceeded, untried again.
        """
        tries = 0  # so far: the notices name the try in flight

        def once() -> Any:
            nonlocal tries
            tries += 1
            return self._refusing_length(create)

        def classify(exc: BaseException) -> Failure | None:
            failure = classify_sdk_error(exc, self._sdk, self.config.timeout_s, (self._key,))
            if failure is not None and failure.timed_out:
                self._waits.abandoned(prompt_tokens)
            return failure

        def waited(seconds: float) -> str:
            return (
                f"no reply from llm endpoint {self.endpoint} after {seconds:.0f} s (model {self.config.model}; "
                f"try {tries} of {self.config.max_retries + 1}, timeout {self.config.timeout_s:g} s)"
            )

        started = time.monotonic()
        with watched(self._waits, waited, self._notice_s):
            response, attempts = call_with_retries(
                once,
                classify,
                config=self.config,
                endpoint=self.endpoint,
                sleep=self._sleep,
                rng=self._rng,
                tools_sent=tools_sent,
                say=self._waits.say,
            )
        return response, attempts, time.monotonic() - started

    def _refusing_length(self, create: Callable[[], Any]) -> Any:
        """``create()``, with a refusal for length turned into ContextExceeded (not the SDK's: not retried)."""
        try:
            return create()
        except self._sdk.APIStatusError as exc:
            refusal = read_refusal(exc.status_code, exc.body)
            if refusal is None:
                raise
            prompt = f"; the prompt has {refusal.prompt_tokens} tokens" if refusal.prompt_tokens else ""
            raise ContextExceeded(
                f"llm endpoint {self.endpoint} refused the request: it does not fit the model's context window of "
                f"{refusal.window} tokens{prompt} ({exc.status_code}: {one_line(refusal.message, (self._key,))})",
                refusal.window,
                refusal.prompt_tokens,
            ) from None
