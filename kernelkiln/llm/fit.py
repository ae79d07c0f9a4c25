"""Each request fitted to the model's window: the reply may have only what the window leaves after the prompt.

Before a call the prompt's size is estimated (a token per four characters of the messages and
tools) and scaled by what this client's server reported for its earlier calls (reported over
estimated prompt tokens, summed), with some headroom; before any report a denser rate is
assumed (code and chat templates run below four characters a token). The reply's cap
(``max_tokens``) is then the smaller of what was asked and what the window leaves.

A server that refuses a request for its length names its window (``overflow``): the client
adopts it, says so once on stderr, and sends the request again once with the cap that leaves.
A server that serves it instead and cuts the reply where its window ends (llama-cpp-python's)
says the window too: a reply that stops for ``length`` short of its cap, its prompt and
completion tokens summing to a round number, was cut at the window, which is adopted and said
(``cut``); the caller builds its next prompt for it.
When the prompt alone leaves too little for a reply it raises ``ContextExceeded`` with the
window, for the caller to build a shorter prompt.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from kernelkiln.llm.once import say_once, to_stderr
from kernelkiln.llm.overflow import ContextExceeded

UNCALIBRATED = 1.25  # reported / estimated prompt tokens assumed before the server has reported any
HEADROOM = 1.05  # on a calibrated estimate: the next prompt's mix of code and prose is not the last one's
MIN_REPLY_TOKENS = 256  # a smaller cap cannot hold a candidate: the prompt is too long for the window
WINDOW_GRAIN = 256  # every context window servers are run with is a multiple of it (2048, 4096, 8192, 32768…)


class WindowFit:
    """One client's window, its calibration on reported usage, and the reply cap they leave (thread-safe)."""

    def __init__(self, window: int, endpoint: str, say: Callable[[str], None] = to_stderr) -> None:
        self.window = window
        self.endpoint = endpoint
        self._say = say
        self._estimated = 0
        self._reported = 0
        self._lock = threading.Lock()

    @property
    def ratio(self) -> float:
        """Reported over estimated prompt tokens so far (``UNCALIBRATED`` before any report)."""
        with self._lock:
            return self._reported / self._estimated if self._estimated else UNCALIBRATED

    def prompt_tokens(self, estimate: int) -> int:
        """The prompt's expected size by the server's count, from the raw four-characters-a-token ``estimate``."""
        with self._lock:
            calibrated = self._estimated > 0
        return math.ceil(estimate * self.ratio * (HEADROOM if calibrated else 1.0))

    def max_tokens(self, estimate: int, asked: int) -> int:
        """The reply cap for a prompt of raw size ``estimate``: ``asked``, or less where the window leaves less.

        ContextExceeded when the window leaves less than a useful reply (``MIN_REPLY_TOKENS``).
        """
        return self._cap(self.prompt_tokens(estimate), asked)

    def observe(self, estimate: int, reported: int) -> None:
        """One call's prompt: ``estimate`` raw tokens, ``reported`` by the server (ignored unless both > 0)."""
        if estimate > 0 and reported > 0:
            with self._lock:
                self._estimated += estimate
                self._reported += reported

    def refused(self, refusal: ContextExceeded, estimate: int, asked: int, sent: int) -> int:
        """The cap to send the refused request again with, having adopted the window the server named.

        ``sent`` is the cap the refused request had; the refusal itself is raised again when a
        second try could not fit either (the prompt alone is too long, or nothing would change).
        """
        if refusal.prompt_tokens is not None:
            self.observe(estimate, refusal.prompt_tokens)
        with self._lock:
            self.window = refusal.window
        prompt = refusal.prompt_tokens if refusal.prompt_tokens is not None else self.prompt_tokens(estimate)
        self._announce(refusal)
        cap = self._cap(prompt, asked)
        if cap >= sent:
            raise refusal
        return cap

    def cut(self, prompt_tokens: int, completion_tokens: int, finish_reason: str, sent: int) -> int | None:
        """The window a reply was cut at, adopted and said once (None: the reply was not cut at a window).

        ``sent`` is the request's reply cap: a reply that reached it stopped there, not at the window.
        """
        total = prompt_tokens + completion_tokens
        if finish_reason != "length" or completion_tokens >= sent or total % WINDOW_GRAIN or total >= self.window:
            return None
        with self._lock:
            self.window = total
        self._announce_window(
            total,
            f"kiln: {self.endpoint} cut a reply at {total} tokens (prompt and reply together): its context window is "
            f"{total} tokens; requests are fitted to it from now on (--context-window {total} sizes prompts for it "
            "from the start)",
        )
        return total

    def _cap(self, prompt: int, asked: int) -> int:
        room = self.window - prompt
        if room < min(asked, MIN_REPLY_TOKENS):
            raise ContextExceeded(
                f"llm endpoint {self.endpoint}: the prompt needs about {prompt} tokens, leaving {max(room, 0)} "
                f"for the reply in the model's context window of {self.window} tokens",
                self.window,
                prompt,
            )
        return min(asked, room)

    def _announce(self, refusal: ContextExceeded) -> None:
        self._announce_window(
            refusal.window,
            f"kiln: {self.endpoint} refused a request as too long: its context window is {refusal.window} tokens; "
            f"requests are fitted to it from now on (--context-window {refusal.window} sizes prompts for it "
            "from the start)",
        )

    def _announce_window(self, window: int, line: str) -> None:
        say_once(("window", self.endpoint, window), line, self._say)
