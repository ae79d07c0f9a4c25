"""One llm turn's conversation in one protocol, and its size as the server counts it.

The size is the server's own prompt count for the last request, plus an estimate of what was
appended since (the reply's text, a re-ask), scaled as a prompt's is (``prompt_fit.scaled``): an
estimate alone drifts from the server's count as replies and re-asks pile up.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelkiln.agents.prompt_fit import scaled
from kernelkiln.agents.protocol import Mode
from kernelkiln.agents.spent import Spent
from kernelkiln.context import Prompt, TokenEstimator
from kernelkiln.llm import Completion, Message, ToolSpec


@dataclass
class Chat:
    """A turn's messages in one protocol, and what the turn has spent so far (across protocols)."""

    mode: Mode
    prompt: Prompt
    tools: tuple[ToolSpec, ...]
    messages: list[Message]
    spent: Spent
    record_asked: bool = False  # the one re-ask for an adoption record alone was made
    # The server's prompt count for the last request and the messages' characters then: only what was appended
    # since is estimated. None before a reply, or once trimmed. (A reply's completion tokens may include
    # reasoning that is not sent back, so they are not counted.)
    counted: tuple[int, int] | None = None

    def answered(self, message: Message, reply: Completion) -> None:
        """Append the model's reply, having noted the size of the request it answered as the server counted it."""
        if reply.prompt_tokens > 0:  # the tools are in the server's prompt count
            self.counted = (reply.prompt_tokens, len(_text(self.messages)))
        self.messages.append(message)

    def room(self, window: int, estimator: TokenEstimator) -> int:
        """What ``window`` leaves the reply after the conversation as it stands."""
        text = _text(self.messages)
        if self.counted is None:
            text += "".join(t.model_dump_json() for t in self.tools)
        tokens, chars = self.counted or (0, 0)  # messages are only appended until a trim: text[chars:] is new
        return window - tokens - scaled(estimator.estimate(text[chars:]), estimator)

    def trim(self, window: int, estimator: TokenEstimator, least: int) -> None:
        """Drop the replies a re-ask answers where the conversation would leave the next reply under ``least``.

        The prompt and the re-ask (which names what was wrong) stay; the model's unusable replies between
        them go. A conversation that ends in tool answers is left whole: each answer follows its call.
        """
        if len(self.messages) > 3 and self.messages[-1].role == "user" and self.room(window, estimator) < least:
            del self.messages[2:-1]
            self.counted = None


def _text(messages: list[Message]) -> str:
    return "".join(m.content + "".join(c.name + str(c.arguments) for c in m.tool_calls) for m in messages)
