"""The llm policy: a model writes whole candidates from a budgeted, layered prompt.

Each turn the context builder assembles the prompt in the largest tier that leaves the reply its
room (``prompt_fit``; ``context/tiers.py``), and the model hands in the code, a ≤160-character
strategy summary and an adoption record for every retrieved experience it was shown, in one of
two reply protocols (``llm.reply_protocol``, switched by ``ReplyProtocol``):
- tools: it may call diagnostic tools (checks, profile, vectorization report) and ends
  with one ``submit_candidate`` call;
- text: no tools are sent; the reply carries a python block, a Summary line and an adoption
  JSON block (``reply.py``).
A reply without usable code or summary is asked again (``reasks`` times), never guessed; a turn
that gets nothing usable returns GaveUp with a one-line reason. An incomplete adoption record
never costs the candidate: the record alone is asked for once, and what is still missing is
recorded as not stated (``adoption.py``). A reply cut at the window, or a refusal naming it,
teaches the window and the turn starts again with a prompt built for it. Every call's tokens are
counted, and nothing is read out of a model's reasoning.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import yaml

from kernelkiln.agents.adoption import candidate_problems, merged, records_request, submitted_records
from kernelkiln.agents.config import LLMPolicyConfig
from kernelkiln.agents.conversation import Chat
from kernelkiln.agents.prompt_fit import ladder, refusal, scaled
from kernelkiln.agents.protocol import Mode, ReplyProtocol
from kernelkiln.agents.reply import parse_text_reply, prose, records_in
from kernelkiln.agents.spent import Spent
from kernelkiln.context import ContextBuilder, TokenEstimator
from kernelkiln.context.config import ContextConfig
from kernelkiln.context.reask import reask
from kernelkiln.context.tiers import FLOOR_TOKENS, REPLY_TOKENS
from kernelkiln.guard import diagnose
from kernelkiln.llm import (
    ChatClient,
    Completion,
    ContextExceeded,
    Message,
    ToolCall,
    ToolSpec,
    ToolsRejected,
    make_client,
)
from kernelkiln.llm.fit import MIN_REPLY_TOKENS
from kernelkiln.llm.once import say_once, to_stderr
from kernelkiln.policy.turn import Choice, GaveUp, Proposal, Turn, code_hash
from kernelkiln.store.records import Attempt, Case

SUBMIT = "submit_candidate"
DIAGNOSTICS = tuple(diagnose.TOOLS)
SWITCHED = "tool calls are not used any more on this endpoint: answer in text, in the format below"
CUT_OFF = "the reply was cut off at the output token limit: think and explain more briefly"
RECORD_REPLY_TOKENS = 256  # the record re-ask's reply: one short JSON block


@lru_cache(maxsize=1)
def tool_specs() -> tuple[ToolSpec, ...]:
    """The tools offered to the model: submit and the guard's diagnostics, described by ``agents/tools.yaml``."""
    data = yaml.safe_load(Path(__file__).with_name("tools.yaml").read_text())
    return tuple(
        ToolSpec(
            name=name, description=" ".join(data[name]["description"].split()), parameters=data[name]["parameters"]
        )
        for name in (SUBMIT, *DIAGNOSTICS)
    )


class LLMPolicy:
    """Whole-candidate proposals from a chat model."""

    name = "llm"
    layered = True

    def __init__(
        self,
        config: LLMPolicyConfig,
        context: ContextConfig,
        agent: str,
        client: ChatClient | None = None,
        builder: ContextBuilder | None = None,
        protocol: ReplyProtocol | None = None,
        say: Callable[[str], None] = to_stderr,
    ):
        """``config`` is the model and its turn's limits, ``context`` what each prompt shows;
        ``protocol`` is the run's shared switch (default: one of this policy's own); ``say`` hears
        the lines a run shows once (the prompt's tier, records not stated)."""
        self.config, self.context = config, context
        self.agent = agent
        self.client = client or make_client(config.llm)
        self.estimator = TokenEstimator()
        self.builder = builder or ContextBuilder(context, self.estimator)
        self.protocol = protocol or ReplyProtocol(config.llm.reply_protocol)
        self.window = config.llm.context_window  # the server's own, once a refusal or a cut reply names it
        self._say = say

    def observe(self, attempt: Attempt) -> None:
        """Nothing to keep: the context builder reads the agent's history from each Turn."""

    def propose(self, turn: Turn) -> Proposal | GaveUp | None:
        if turn.parent_id is None and turn.code and not turn.history and code_hash(turn.code) not in turn.evaluated:
            return Proposal(
                code=turn.code,
                summary="seed: the task's starting candidate, as written",
                parent_id=None,
                journal="## Strategy\nMeasure the starting candidate first.\n",
                case=Case(move="seed"),
            )
        chat = self._open(turn, self.protocol.mode, Spent())
        if isinstance(chat, GaveUp):
            return chat
        diagnostics_left, reasks_left = self.config.tool_calls, self.config.reasks
        while True:
            if chat.mode == "tools" and self.protocol.mode == "text":  # another agent's turn switched the run
                if isinstance(chat := self._open(turn, "text", chat.spent), GaveUp):
                    return chat
            self._trim(chat)
            if (too_long := self._beyond_window(chat)) is not None:
                return too_long
            try:
                reply = self.client.complete(chat.messages, chat.tools, max_tokens=self.config.llm.max_output_tokens)
            except ToolsRejected as exc:
                if not self.protocol.rejected(exc):
                    raise ToolsRejected(
                        f"{exc}; this endpoint takes no tool calls: use --reply-protocol text", exc.detail
                    ) from None
                continue
            except ContextExceeded as exc:
                if exc.window >= self.window:
                    return chat.spent.gave_up(chat.mode, reason=str(exc))
                self.window = exc.window  # this turn starts again with a prompt built for it, as later ones are
                if isinstance(chat := self._open(turn, chat.mode, chat.spent), GaveUp):
                    return chat
                continue
            if not chat.spent.calls:
                self.estimator.observe(
                    len(chat.prompt.system) + len(chat.prompt.user) + sum(len(t.model_dump_json()) for t in chat.tools),
                    reply.prompt_tokens,
                )
            if reply.window is not None and reply.window < self.window:
                chat.spent.add(reply, "")  # cut at the window the server has: counted, and learned from
                self.window = reply.window
                if isinstance(chat := self._open(turn, chat.mode, chat.spent), GaveUp):
                    return chat
                continue
            if chat.mode == "text":
                chat.spent.add(reply, prose(reply.text))
                chat.answered(Message(role="assistant", content=reply.text), reply)
                done, problems = self._text_turn(turn, chat, reply)
            else:
                chat.spent.add(reply, reply.text)
                chat.answered(reply.as_message(), reply)
                done, problems, diagnostics_left = self._tools_turn(turn, chat, reply, diagnostics_left)
                # A reply cut off while still reasoning is no text answer: it neither counts nor resets.
                answered = bool(reply.tool_calls or reply.text.strip())
                if answered and self.protocol.replied(bool(reply.tool_calls)) and done is None:
                    done, problems = self._text_turn(turn, chat, reply)  # it may already be a text reply
                    if done is None:  # the switch's re-ask is free: it happens once a run
                        if isinstance(chat := self._open(turn, "text", chat.spent), GaveUp):
                            return chat
                        chat.messages += [
                            Message(role="assistant", content=reply.text),
                            self._reask(chat, [SWITCHED, *problems]),
                        ]
                        continue
            if done is not None:
                return done
            if not problems:
                continue  # the model is investigating; its diagnostics were answered
            if reasks_left == 0:
                return chat.spent.gave_up(chat.mode)
            reasks_left -= 1
            chat.messages.append(self._reask(chat, problems))

    # -- one reply, by protocol ------------------------------------------------------------------
    def _text_turn(self, turn: Turn, chat: Chat, reply: Completion) -> tuple[Proposal | None, list[str]]:
        parsed, problems = parse_text_reply(reply.text, chat.prompt.shown_experiences)
        if parsed is not None:
            choices = self._records(chat, parsed.choices, list(parsed.record_problems), None)
            return self._proposal(turn, parsed.code, parsed.summary, choices, chat), []
        if chat.mode == "text":  # a reply of tools mode, read at the switch, was not made in text
            chat.spent.text_problems.append(problems)
        said = [p.text for p in problems] + ([CUT_OFF] if reply.finish_reason == "length" else [])
        return None, said

    def _tools_turn(
        self, turn: Turn, chat: Chat, reply: Completion, diagnostics_left: int
    ) -> tuple[Proposal | None, list[str], int]:
        """A proposal; or the problems to re-ask with (none: diagnostics were answered, call again)."""
        submit = next((c for c in reply.tool_calls if c.name == SUBMIT), None)
        problems = candidate_problems(submit) if submit else []
        if submit is not None and not problems:
            args = submit.arguments
            choices, lacking = submitted_records(args, chat.prompt.shown_experiences)
            taken = "taken: it is evaluated" + (f" (its adoption record: {'; '.join(lacking)})" if lacking else "")
            chat.messages += [  # every call answered, as the APIs require, should the record be asked for
                Message(
                    role="tool",
                    content=taken if c is submit else "not run: the turn ended",
                    tool_call_id=c.id,
                    name=c.name,
                )
                for c in reply.tool_calls
            ]
            choices = self._records(chat, choices, lacking, submit)
            return self._proposal(turn, args["code"], args["summary"], choices, chat), [], diagnostics_left
        if submit is not None:
            chat.spent.submit_problems = problems
        wants_tools = [c for c in reply.tool_calls if c.name in DIAGNOSTICS] if turn.diagnose else []
        answers, diagnostics_left = self._answer(turn, reply.tool_calls, problems, diagnostics_left)
        chat.messages.extend(answers)
        if wants_tools and submit is None and diagnostics_left >= 0:
            return None, [], diagnostics_left
        problems = problems or ["the reply did not call submit_candidate"]
        if reply.finish_reason == "length":
            problems.append(CUT_OFF)
        return None, problems, diagnostics_left

    def _records(
        self, chat: Chat, choices: tuple[Choice, ...], lacking: list[str], submit: ToolCall | None
    ) -> tuple[Choice, ...]:
        """``choices`` with what one re-ask for the record alone adds, where the record was incomplete and the
        conversation leaves room for it (the candidate is evaluated either way)."""
        shown = chat.prompt.shown_experiences
        missing = [i for i in shown if i not in {c.experience_id for c in choices}]
        if not missing or not lacking or chat.record_asked:
            return choices
        chat.record_asked = True
        chat.messages.append(Message(role="user", content=records_request(missing)))
        if chat.room(self.window, self.estimator) < RECORD_REPLY_TOKENS:
            chat.messages.pop()
            return choices
        try:
            reply = self.client.complete(chat.messages, chat.tools, max_tokens=RECORD_REPLY_TOKENS)
        except ContextExceeded:
            return choices
        chat.spent.add(reply, "")
        again = next((c for c in reply.tool_calls if c.name == SUBMIT), None)
        later = submitted_records(again.arguments, missing)[0] if again and not again.malformed else ()
        return merged(choices, later or records_in(reply.text, missing), shown)

    # -- conversation -----------------------------------------------------------------------------
    def _open(self, turn: Turn, mode: Mode, spent: Spent) -> Chat | GaveUp:
        """A fresh conversation for ``turn``: the largest tier (and, failing tools, the text protocol) whose prompt
        leaves the reply its room; GaveUp, before any request, when even the minimal one leaves under the floor."""
        llm, passive = self.config.llm, self.context.mode == "passive"
        room, floor = min(llm.max_output_tokens, REPLY_TOKENS), min(llm.max_output_tokens, FLOOR_TOKENS)
        steps = (("full", mode),) if passive else ladder(mode)
        sizes: dict[str, int] = {}
        for tier, step_mode in steps:
            tools = self._tools(turn, step_mode)
            tools_tokens = self.estimator.estimate("x" * sum(len(t.model_dump_json()) for t in tools)) if tools else 0
            prompt = self.builder.build(
                turn,
                window=self.window,
                generation=self._reserved(),
                tools_tokens=tools_tokens,
                protocol=step_mode,
                tier=tier,
            )
            needed = sizes[tier] = scaled(prompt.estimated_tokens, self.estimator)
            last = tier == "minimal" and self.window - needed >= floor
            if passive or self.window - needed >= room or last:
                messages = [Message(role="system", content=prompt.system), Message(role="user", content=prompt.user)]
                if tier != "full":
                    dropped = ", no tools" if step_mode != mode else ""
                    self._once(
                        ("tier", turn.task.name, tier, str(self.window)),
                        f"kiln: {turn.task.name}: {tier} prompts (about {needed} tokens{dropped}) so the reply keeps "
                        f"{self.window - needed} of the model's window of {self.window} tokens; the full prompt "
                        f"needs about {sizes['full']}",
                    )
                return Chat(step_mode, prompt, tools, messages, spent)
        return spent.gave_up("text", reason=refusal(turn.task.name, sizes["minimal"], self.window, floor))

    def _tools(self, turn: Turn, mode: Mode) -> tuple[ToolSpec, ...]:
        if mode == "text":
            return ()
        return tool_specs() if turn.diagnose is not None else tuple(t for t in tool_specs() if t.name == SUBMIT)

    def _once(self, key: tuple[str, ...], line: str) -> None:
        say_once(("llm policy", *key), line, self._say)

    def _reserved(self) -> int:
        """Tokens the prompt leaves for the reply: ``max_output_tokens``, or half the window where that is less.

        A small window (a local server's 4,096) would otherwise hold the whole of a 4,096-token
        reply back and leave the prompt nothing; the client caps each request's reply at what
        the window leaves after the prompt (``llm.fit``).
        """
        return min(self.config.llm.max_output_tokens, self.window // 2)

    def _trim(self, chat: Chat) -> None:
        """Where the conversation would leave the next reply under its room, drop the replies a re-ask answers
        (``Chat.trim``); passive context is never trimmed (it accumulates by design)."""
        if self.context.mode != "passive":
            chat.trim(self.window, self.estimator, min(self.config.llm.max_output_tokens, REPLY_TOKENS))

    def _beyond_window(self, chat: Chat) -> GaveUp | None:
        """GaveUp when the conversation leaves too little of the model's window for a reply, else None.

        The reply may have what the window leaves after the conversation, down to
        ``MIN_REPLY_TOKENS`` (or ``max_output_tokens`` where that is less). ``_open`` fits the
        first prompt; re-asks and tool rounds make the conversation grow. Passive context (the
        context ablation's other arm) accumulates past any window by design: it is not held to
        it, and a real endpoint refuses what does not fit.
        """
        llm = self.config.llm
        if self.context.mode == "passive":
            return None
        room = chat.room(self.window, self.estimator)
        least = min(llm.max_output_tokens, MIN_REPLY_TOKENS)
        if room >= least:
            return None
        needed = self.window - room
        what = (
            "the prompt (the task, its reference and the working code are never cut)"
            if not chat.spent.calls
            else f"the conversation, after {len(chat.spent.calls)} calls,"
        )
        advice = (
            "set --context-window if the model has more"
            if self.window == llm.context_window
            else "its server said so: serve the model with a larger window"
        )
        return chat.spent.gave_up(
            chat.mode,
            reason=(
                f"{what} needs about {needed} tokens of the model's window of {self.window}, leaving "
                f"{max(0, room)} for the reply where at least {least} are needed: {advice}"
            ),
        )

    def _reask(self, chat: Chat, problems: list[str]) -> Message:
        return Message(role="user", content=reask(problems, chat.prompt.shown_experiences, protocol=chat.mode))

    def _answer(
        self, turn: Turn, calls: tuple[ToolCall, ...], problems: list[str], left: int
    ) -> tuple[list[Message], int]:
        """A tool message for every call of the reply (the APIs require one per call)."""
        answers = []
        for call in calls:
            if call.name == SUBMIT:
                text = "not accepted: " + "; ".join(problems)
            elif call.name in DIAGNOSTICS and turn.diagnose is not None:
                code = call.arguments.get("code")
                if left <= 0:
                    text = "no diagnostic calls left this turn: submit your candidate"
                elif not isinstance(code, str) or not code.strip():
                    text = "the call needs `code`: a complete candidate file"
                else:
                    text = turn.diagnose(call.name, code)
                left -= 1
            else:
                offered = [SUBMIT, *DIAGNOSTICS] if turn.diagnose is not None else [SUBMIT]
                text = f"unknown tool {call.name!r}; the tools offered are {', '.join(offered)}"
            answers.append(Message(role="tool", content=text, tool_call_id=call.id, name=call.name))
        return answers, left

    def _proposal(self, turn: Turn, code: str, summary: str, choices: tuple[Choice, ...], chat: Chat) -> Proposal:
        proposal = chat.spent.proposed(turn.parent_id, code, summary, choices, chat.prompt)
        if proposal.case.not_stated:
            self._once(
                ("not stated", self.agent),
                f"kiln: {self.agent}: the model did not state whether its candidate adopted some retrieved "
                "experiences; the candidates are evaluated, and those records are left out of memory's "
                "adoption credit (run.json: adoptions_not_stated)",
            )
        return proposal
