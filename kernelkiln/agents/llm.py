"""The llm policy: a model writes whole candidates from a budgeted, layered prompt.

Each turn: the context builder assembles the prompt, the model may call diagnostic
tools (checks, profile, vectorization report), and must end with one
``submit_candidate`` call carrying the code, a ≤160-character strategy summary and an
adoption record for every retrieved experience it was shown. A reply that lacks any of
them is asked again (``reasks`` times), never guessed. Every call's prompt and
completion tokens are recorded.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from kernelkiln.context import ContextBuilder, TokenEstimator
from kernelkiln.context.reask import reask
from kernelkiln.guard import diagnose
from kernelkiln.llm import ChatClient, Completion, Message, ToolCall, ToolSpec, make_client
from kernelkiln.policy.turn import Choice, Proposal, Turn, code_hash
from kernelkiln.store.records import SUMMARY_CHARS, Attempt, Case

SUBMIT = "submit_candidate"
DIAGNOSTICS = tuple(diagnose.TOOLS)


@lru_cache(maxsize=1)
def tool_specs() -> tuple[ToolSpec, ...]:
    """The tools offered to the model: submit and the guard's diagnostics, described by ``agents/tools.yaml``."""
    data = yaml.safe_load(Path(__file__).with_name("tools.yaml").read_text())
    return tuple(ToolSpec(name=name, description=" ".join(data[name]["description"].split()),
                          parameters=data[name]["parameters"]) for name in (SUBMIT, *DIAGNOSTICS))


class LLMPolicy:
    """Whole-candidate proposals from a chat model."""

    name = "llm"

    def __init__(self, config: Any, agent: str, client: ChatClient | None = None,
                 builder: ContextBuilder | None = None):
        """``config`` is the run's OptimizeConfig (its ``llm``, ``context``, ``tool_calls`` and ``reasks``)."""
        self.config = config
        self.agent = agent
        self.client = client or make_client(config.llm)
        self.estimator = TokenEstimator()
        self.builder = builder or ContextBuilder(config.context, self.estimator)

    def observe(self, attempt: Attempt) -> None:
        """Nothing to keep: the context builder reads the agent's history from each Turn."""

    def propose(self, turn: Turn) -> Proposal | None:
        if turn.parent_id is None and turn.code and not turn.history and code_hash(turn.code) not in turn.evaluated:
            return Proposal(code=turn.code, summary="seed: the task's starting candidate, as written",
                            parent_id=None, journal="## Strategy\nMeasure the seed candidate first.\n",
                            case=Case(move="seed"))
        llm = self.config.llm
        tools = tool_specs() if turn.diagnose is not None else tuple(t for t in tool_specs() if t.name == SUBMIT)
        tools_chars = sum(len(t.model_dump_json()) for t in tools)
        tools_tokens = self.estimator.estimate("x" * tools_chars)
        prompt = self.builder.build(turn, window=llm.context_window, generation=llm.max_output_tokens,
                                    tools_tokens=tools_tokens)
        messages = [Message(role="system", content=prompt.system), Message(role="user", content=prompt.user)]
        spent = _Spent()
        diagnostics_left, reasks_left = self.config.tool_calls, self.config.reasks
        while True:
            reply = self.client.complete(messages, tools, max_tokens=llm.max_output_tokens)
            if not spent.calls:
                self.estimator.observe(len(prompt.system) + len(prompt.user) + tools_chars, reply.prompt_tokens)
            spent.add(reply)
            messages.append(reply.as_message())
            submit = next((c for c in reply.tool_calls if c.name == SUBMIT), None)
            problems = _problems(submit, prompt.shown_experiences) if submit else []
            if submit is not None and not problems:
                return self._proposal(turn, submit, spent, prompt.shown_experiences)
            wants_tools = [c for c in reply.tool_calls if c.name in DIAGNOSTICS] if turn.diagnose else []
            answers, diagnostics_left = self._answer(turn, reply.tool_calls, problems, diagnostics_left)
            messages.extend(answers)
            if wants_tools and submit is None and diagnostics_left >= 0:
                continue  # the model is investigating; its diagnostics were answered
            if reasks_left == 0:
                return None
            reasks_left -= 1
            if submit is None:
                problems = ["the reply did not call submit_candidate"]
            messages.append(Message(role="user", content=reask(problems, prompt.shown_experiences)))

    def _answer(self, turn: Turn, calls: tuple[ToolCall, ...], problems: list[str],
                left: int) -> tuple[list[Message], int]:
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

    def _proposal(self, turn: Turn, submit: ToolCall, spent: _Spent, shown: tuple[str, ...]) -> Proposal:
        args = submit.arguments
        records = {a["experience_id"]: a for a in args["adoptions"]}
        choices = tuple(Choice(i, bool(records[i]["adopted"]), str(records[i].get("why", ""))[:300]) for i in shown)
        summary = " ".join(str(args["summary"]).split())[:SUMMARY_CHARS]
        journal = (f"## Strategy\n{summary}\n\n## Adoptions\n"
                   + "".join(f"- {c.experience_id}: {'adopted' if c.adopted else 'not adopted'} ({c.why})\n"
                             for c in choices)
                   + (f"\n## Model's notes\n{spent.text.strip()[:1200]}\n" if spent.text.strip() else ""))
        return Proposal(code=args["code"], summary=summary, parent_id=turn.parent_id, choices=choices,
                        journal=journal, case=Case(move="llm", calls=spent.calls),
                        prompt_tokens=spent.prompt, completion_tokens=spent.completion, cost_usd=spent.cost)


class _Spent:
    """Tokens and cost of one turn's calls."""

    def __init__(self) -> None:
        self.prompt = self.completion = 0
        self.cost = 0.0
        self.calls: list[list[int]] = []
        self.text = ""

    def add(self, reply: Completion) -> None:
        self.prompt += reply.prompt_tokens
        self.completion += reply.completion_tokens
        self.cost += reply.cost_usd
        self.calls.append([reply.prompt_tokens, reply.completion_tokens])
        self.text += reply.text


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
            for a in adoptions):
        problems.append("`adoptions` must be a list of {experience_id, adopted: true|false, why}")
    else:
        missing = [i for i in shown if i not in {a["experience_id"] for a in adoptions}]
        if missing:
            problems.append(f"no adoption record for {', '.join(missing)}")
    return problems
