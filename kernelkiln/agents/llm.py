"""The llm policy: a model writes whole candidates from a budgeted, layered prompt.

Each turn the context builder assembles the prompt, and the model hands in the code, a
≤160-character strategy summary and an adoption record for every retrieved experience it
was shown, in one of two reply protocols (``llm.reply_protocol``, switched by ``ReplyProtocol``):
- tools: it may call diagnostic tools (checks, profile, vectorization report) and ends
  with one ``submit_candidate`` call;
- text: no tools are sent; the reply carries a python block, a Summary line and an adoption
  JSON block (``reply.py``).
A reply that lacks any part is asked again (``reasks`` times), never guessed; a turn that
gets nothing usable returns GaveUp with a one-line reason. Every call's tokens are counted,
and nothing is read out of a model's reasoning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from kernelkiln.agents.config import LLMPolicyConfig
from kernelkiln.agents.protocol import Mode, ReplyProtocol
from kernelkiln.agents.reply import Problem, parse_text_reply, prose
from kernelkiln.context import ContextBuilder, Prompt, TokenEstimator
from kernelkiln.context.config import ContextConfig
from kernelkiln.context.reask import reask
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
from kernelkiln.policy.turn import Choice, GaveUp, Proposal, Turn, code_hash
from kernelkiln.store.records import SUMMARY_CHARS, Attempt, Case

SUBMIT = "submit_candidate"
DIAGNOSTICS = tuple(diagnose.TOOLS)
SWITCHED = "tool calls are not used any more on this endpoint: answer in text, in the format below"
CUT_OFF = "the reply was cut off at the output token limit: think and explain more briefly"


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


@dataclass
class _Chat:
    """One turn's conversation in one protocol, and what the turn has spent so far (across protocols)."""

    mode: Mode
    prompt: Prompt
    tools: tuple[ToolSpec, ...]
    messages: list[Message]
    spent: _Spent


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
    ):
        """``config`` is the model and its turn's limits, ``context`` what each prompt shows;
        ``protocol`` is the run's shared switch (default: one of this policy's own)."""
        self.config, self.context = config, context
        self.agent = agent
        self.client = client or make_client(config.llm)
        self.estimator = TokenEstimator()
        self.builder = builder or ContextBuilder(context, self.estimator)
        self.protocol = protocol or ReplyProtocol(config.llm.reply_protocol)
        self.window = config.llm.context_window  # the server's own, once a refusal for length names it

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
        chat = self._open(turn, self.protocol.mode, _Spent())
        diagnostics_left, reasks_left = self.config.tool_calls, self.config.reasks
        while True:
            if chat.mode != self.protocol.mode:  # another agent's turn switched the run to text
                chat = self._open(turn, "text", chat.spent)
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
                chat = self._open(turn, chat.mode, chat.spent)
                continue
            if not chat.spent.calls:
                self.estimator.observe(
                    len(chat.prompt.system) + len(chat.prompt.user) + sum(len(t.model_dump_json()) for t in chat.tools),
                    reply.prompt_tokens,
                )
            if chat.mode == "text":
                chat.spent.add(reply, prose(reply.text))
                chat.messages.append(Message(role="assistant", content=reply.text))
                done, problems = self._text_turn(turn, chat, reply)
            else:
                chat.spent.add(reply, reply.text)
                chat.messages.append(reply.as_message())
                done, problems, diagnostics_left = self._tools_turn(turn, chat, reply, diagnostics_left)
                # A reply cut off while still reasoning is no text answer: it neither counts nor resets.
                answered = bool(reply.tool_calls or reply.text.strip())
                if answered and self.protocol.replied(bool(reply.tool_calls)) and done is None:
                    done, problems = self._text_turn(turn, chat, reply)  # it may already be a text reply
                    if done is None:  # the switch's re-ask is free: it happens once a run
                        chat = self._open(turn, "text", chat.spent)
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
    def _text_turn(self, turn: Turn, chat: _Chat, reply: Completion) -> tuple[Proposal | None, list[str]]:
        parsed, problems = parse_text_reply(reply.text, chat.prompt.shown_experiences)
        if parsed is not None:
            return self._proposal(turn, parsed.code, parsed.summary, parsed.choices, chat.spent), []
        if chat.mode == "text":  # a reply of tools mode, read at the switch, was not made in text
            chat.spent.text_problems.append(problems)
        said = [p.text for p in problems] + ([CUT_OFF] if reply.finish_reason == "length" else [])
        return None, said

    def _tools_turn(
        self, turn: Turn, chat: _Chat, reply: Completion, diagnostics_left: int
    ) -> tuple[Proposal | None, list[str], int]:
        """A proposal; or the problems to re-ask with (none: diagnostics were answered, call again)."""
        submit = next((c for c in reply.tool_calls if c.name == SUBMIT), None)
        problems = _problems(submit, chat.prompt.shown_experiences) if submit else []
        if submit is not None and not problems:
            args = submit.arguments
            records = {a["experience_id"]: a for a in args["adoptions"]}
            choices = tuple(
                Choice(i, bool(records[i]["adopted"]), str(records[i].get("why", ""))[:300])
                for i in chat.prompt.shown_experiences
            )
            return self._proposal(turn, args["code"], args["summary"], choices, chat.spent), [], diagnostics_left
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

    # -- conversation -----------------------------------------------------------------------------
    def _open(self, turn: Turn, mode: Mode, spent: _Spent) -> _Chat:
        """A fresh conversation for ``turn`` in ``mode``: the system and user prompt, and the tools on offer."""
        if mode == "text":
            tools: tuple[ToolSpec, ...] = ()
        else:
            tools = tool_specs() if turn.diagnose is not None else tuple(t for t in tool_specs() if t.name == SUBMIT)
        tools_tokens = self.estimator.estimate("x" * sum(len(t.model_dump_json()) for t in tools)) if tools else 0
        prompt = self.builder.build(
            turn, window=self.window, generation=self._reserved(), tools_tokens=tools_tokens, protocol=mode
        )
        messages = [Message(role="system", content=prompt.system), Message(role="user", content=prompt.user)]
        return _Chat(mode, prompt, tools, messages, spent)

    def _reserved(self) -> int:
        """Tokens the prompt leaves for the reply: ``max_output_tokens``, or half the window where that is less.

        A small window (a local server's 4,096) would otherwise hold the whole of a 4,096-token
        reply back and leave the prompt nothing; the client caps each request's reply at what
        the window leaves after the prompt (``llm.fit``).
        """
        return min(self.config.llm.max_output_tokens, self.window // 2)

    def _beyond_window(self, chat: _Chat) -> GaveUp | None:
        """GaveUp when the conversation leaves too little of the model's window for a reply, else None.

        The reply may have what the window leaves after the conversation, down to
        ``MIN_REPLY_TOKENS`` (or ``max_output_tokens`` where that is less). The builder fits the
        first prompt; the hot layer (the task, its reference, the working
        code) is never cut, and re-asks and tool rounds make the conversation grow. Passive
        context (the context ablation's other arm) accumulates past any window by design: it is
        not held to it, and a real endpoint refuses what does not fit.
        """
        llm = self.config.llm
        if self.context.mode == "passive":
            return None
        text = "".join(m.content + "".join(c.name + str(c.arguments) for c in m.tool_calls) for m in chat.messages)
        needed = self.estimator.estimate(text + "".join(t.model_dump_json() for t in chat.tools))
        least = min(llm.max_output_tokens, MIN_REPLY_TOKENS)
        if self.window - needed >= least:
            return None
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
                f"{max(0, self.window - needed)} for the reply where at least {least} are needed: {advice}"
            ),
        )

    def _reask(self, chat: _Chat, problems: list[str]) -> Message:
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

    def _proposal(self, turn: Turn, code: str, summary: str, choices: tuple[Choice, ...], spent: _Spent) -> Proposal:
        summary = " ".join(str(summary).split())[:SUMMARY_CHARS]
        notes = spent.text.strip()
        journal = (
            f"## Strategy\n{summary}\n\n## Adoptions\n"
            + "".join(f"- {c.experience_id}: {'adopted' if c.adopted else 'not adopted'} ({c.why})\n" for c in choices)
            + (f"\n## Model's notes\n{notes[:1200]}\n" if notes else "")
        )
        return Proposal(
            code=code,
            summary=summary,
            parent_id=turn.parent_id,
            choices=choices,
            journal=journal,
            case=Case(move="llm", calls=list(spent.calls)),
            prompt_tokens=spent.prompt,
            completion_tokens=spent.completion,
            cost_usd=spent.cost,
        )


@dataclass
class _Spent:
    """Tokens and cost of one turn's calls, and what its unusable replies lacked."""

    prompt: int = 0
    completion: int = 0
    cost: float = 0.0
    calls: list[tuple[int, int]] = field(default_factory=list)
    text: str = ""  # the replies' prose, for the journal
    submit_problems: list[str] = field(default_factory=list)  # the last incomplete submit_candidate's
    text_problems: list[list[Problem]] = field(default_factory=list)  # each unusable reply's in text mode

    def add(self, reply: Completion, notes: str) -> None:
        self.prompt += reply.prompt_tokens
        self.completion += reply.completion_tokens
        self.cost += reply.cost_usd
        self.calls.append((reply.prompt_tokens, reply.completion_tokens))
        if notes.strip():
            self.text += notes.strip() + "\n"

    def gave_up(self, mode: Mode, reason: str = "") -> GaveUp:
        """The turn's end without a candidate, and everything it cost; ``reason`` (default: what the
        replies lacked) says what to do."""
        return GaveUp(
            reason=" ".join((reason or self._lacked(mode)).split())[:400],
            prompt_tokens=self.prompt,
            completion_tokens=self.completion,
            cost_usd=self.cost,
            calls=tuple(self.calls),
        )

    def _lacked(self, mode: Mode) -> str:
        if mode == "text":  # the replies since the switch to text (those before it were asked for tool calls)
            texts = len(self.text_problems)
            parts = dict.fromkeys(p.part for problems in self.text_problems for p in problems)
            last = "; ".join(p.text for p in self.text_problems[-1]) if self.text_problems else ""
            return (
                f"the model answered {_times(texts)} in text without a usable {' / '.join(parts) or 'reply'} "
                f"(last: {last})"
            )
        n = len(self.calls)
        if self.submit_problems:
            replies = "1 reply" if n == 1 else f"{n} replies"
            return (
                f"the model gave no complete submit_candidate call in {replies} "
                f"(last: {'; '.join(self.submit_problems)})"
            )
        return (
            f"the model answered {_times(n)} without calling submit_candidate; this endpoint may not "
            "support tool calls: try --reply-protocol text"
        )


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _problems(submit: ToolCall, shown: tuple[str, ...]) -> list[str]:
    """What a submit_candidate call lacks (empty when it is complete)."""
    args = submit.arguments
    if submit.malformed:
        return ["the submit_candidate arguments were not a JSON object"]
    problems = []
    code = args.get("code")
    if not isinstance(code, str) or "ModelNew" not in code:
        problems.append("`code` must be the complete Python file defining ModelNew")
    if not isinstance(args.get("summary"), str) or not args["summary"].strip():
        problems.append(f"`summary` is missing: name the strategy in at most {SUMMARY_CHARS} characters")
    adoptions = args.get("adoptions")
    if not isinstance(adoptions, list) or not all(
        isinstance(a, dict) and isinstance(a.get("experience_id"), str) and isinstance(a.get("adopted"), bool)
        for a in adoptions
    ):
        problems.append("`adoptions` must be a list of {experience_id, adopted: true|false, why}")
    else:
        missing = [i for i in shown if i not in {a["experience_id"] for a in adoptions}]
        if missing:
            problems.append(f"no adoption record for {', '.join(missing)}")
    return problems
