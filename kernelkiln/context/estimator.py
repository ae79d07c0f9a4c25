"""Token estimates before a call, calibrated on the provider's usage reports.

No tokenizer is downloaded: a text costs ``ceil(chars / ratio)`` tokens, the ratio
starting at 4 characters per token and becoming the running total of the prompt
characters sent over the prompt tokens the provider reported for them.
"""

from __future__ import annotations

import math
import threading

DEFAULT_CHARS_PER_TOKEN = 4.0
MIN_CHARS_PER_TOKEN = 1.0
MAX_CHARS_PER_TOKEN = 10.0


class TokenEstimator:
    """Characters-per-token estimates that learn from reported usage."""

    def __init__(self, chars_per_token: float = DEFAULT_CHARS_PER_TOKEN):
        if chars_per_token <= 0:
            raise ValueError("chars_per_token must be positive")
        self._initial = chars_per_token
        self._chars = 0
        self._tokens = 0
        self._lock = threading.Lock()

    @property
    def chars_per_token(self) -> float:
        """The current ratio: the running total once usage was observed, else the initial one."""
        with self._lock:
            if self._tokens == 0:
                return self._initial
            ratio = self._chars / self._tokens
        return min(MAX_CHARS_PER_TOKEN, max(MIN_CHARS_PER_TOKEN, ratio))

    @property
    def observations(self) -> tuple[int, int]:
        """(characters, tokens) observed so far."""
        with self._lock:
            return self._chars, self._tokens

    def estimate(self, text: str) -> int:
        """Tokens of ``text`` (0 for an empty text); rounded up, so parts never sum to less than the whole."""
        return math.ceil(len(text) / self.chars_per_token) if text else 0

    def observe(self, prompt_chars: int, prompt_tokens: int) -> None:
        """Add one call's usage report: ``prompt_chars`` sent, ``prompt_tokens`` billed (ignored unless both > 0)."""
        if prompt_chars <= 0 or prompt_tokens <= 0:
            return
        with self._lock:
            self._chars += prompt_chars
            self._tokens += prompt_tokens
