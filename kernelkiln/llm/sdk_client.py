"""What the SDK clients share: the key, the SDK's client object, and the retry loop around each call."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from kernelkiln.llm.client import resolve_api_key
from kernelkiln.llm.config import LLMConfig
from kernelkiln.llm.retry import call_with_retries, classify_sdk_error


class SDKClient:
    """Base of ``OpenAIClient`` and ``AnthropicClient``: kernelkiln's retries, never the SDK's."""

    def __init__(
        self,
        config: LLMConfig,
        sdk: Any,
        factory: Callable[..., Any],
        *,
        sleep: Callable[[float], None],
        rng: random.Random | None,
    ) -> None:
        self.config = config
        self._sdk = sdk
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._key = resolve_api_key(config)
        self._client = factory(base_url=config.base_url, api_key=self._key, timeout=config.timeout_s, max_retries=0)
        self.endpoint = str(self._client.base_url).rstrip("/")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.config.model!r}, endpoint={self.endpoint!r})"

    def _with_retries(self, create: Callable[[], Any], tools_sent: bool = False) -> tuple[Any, int, float]:
        """``create()``'s response, the tries it took, and the seconds they took (waits included).

        ``tools_sent``: the request offered tools (a refusal naming them raises ToolsRejected).
        """
        started = time.monotonic()
        response, attempts = call_with_retries(
            create,
            lambda exc: classify_sdk_error(exc, self._sdk, self.config.timeout_s, (self._key,)),
            config=self.config,
            endpoint=self.endpoint,
            sleep=self._sleep,
            rng=self._rng,
            tools_sent=tools_sent,
        )
        return response, attempts, time.monotonic() - started
