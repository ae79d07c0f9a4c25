"""Which reply protocol a run's llm agents speak: one switch shared by every agent and task of the run.

``tools`` and ``text`` stay as set. ``auto`` starts with tools and switches to text once, for the
rest of the run, saying so in one line on stderr, when the endpoint rejects the ``tools``
parameter or when the model answers in text (no tool call) twice in a row. A resumed run
starts again from tools.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Literal

from kernelkiln.llm.client import ToolsRejected

Setting = Literal["auto", "tools", "text"]
Mode = Literal["tools", "text"]
TEXT_REPLIES_TO_SWITCH = 2


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class ReplyProtocol:
    """The mode in force, and the rule that moves ``auto`` from tools to text (thread-safe)."""

    def __init__(self, setting: Setting = "auto", say: Callable[[str], None] = _to_stderr) -> None:
        self.setting: Setting = setting
        self._mode: Mode = "text" if setting == "text" else "tools"
        self._text_replies = 0
        self._say = say
        self._lock = threading.Lock()

    @property
    def mode(self) -> Mode:
        return self._mode

    def rejected(self, error: ToolsRejected) -> bool:
        """The endpoint refused tools: whether the run now replies in text (False under ``tools``: a user error)."""
        return self._switch(f"the endpoint rejected tool calls ({error.detail or error})")

    def replied(self, used_tools: bool) -> bool:
        """Count one reply of tools mode; True when it was the second text-only one in a row and auto switched."""
        with self._lock:
            self._text_replies = 0 if used_tools else self._text_replies + 1
            due = self._text_replies >= TEXT_REPLIES_TO_SWITCH
        return due and self._switch("the model answered twice in a row without calling a tool")

    def _switch(self, why: str) -> bool:
        with self._lock:
            if self.setting != "auto" or self._mode == "text":
                return self._mode == "text"
            self._mode = "text"
        self._say(f"kiln: {why}: replying in text from now on (--reply-protocol text)")
        return True
