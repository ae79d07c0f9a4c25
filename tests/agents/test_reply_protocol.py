"""Reply protocols of the llm policy: text mode, auto's switch from tools, GaveUp, and reasoning kept apart."""

from __future__ import annotations

import pytest

from kernelkiln.agents.config import LLMPolicyConfig
from kernelkiln.agents.llm import SUBMIT, LLMPolicy
from kernelkiln.agents.policies import RunPolicies
from kernelkiln.agents.protocol import ReplyProtocol
from kernelkiln.context.config import ContextConfig
from kernelkiln.llm import LLMError, ToolsRejected
from kernelkiln.policy.turn import GaveUp, Proposal
from kernelkiln.testing.llm import ScriptedClient, text_reply
from kernelkiln.testing.turns import START_CODE, make_turn, retrieved

CANDIDATE = START_CODE.replace("def forward", "# text protocol\n    def forward")
REJECTED = {"status": 400, "message": "registry.ollama.ai/library/gemma:2b does not support tools"}


def config(protocol: str = "auto", **fields) -> LLMPolicyConfig:
    return LLMPolicyConfig(
        llm={"model": "m", "base_url": "http://127.0.0.1:9/v1", "reply_protocol": protocol}, **fields
    )


def policy(script, protocol: str = "auto", said: list[str] | None = None, **fields):
    cfg = config(protocol, **fields)
    switch = ReplyProtocol(cfg.llm.reply_protocol, say=(said if said is not None else []).append)
    client = ScriptedClient(script)
    return LLMPolicy(cfg, ContextConfig(), "a1", client=client, protocol=switch), client


def turn(**overrides):
    return make_turn(parent_id="a-parent", **overrides)


def submit() -> dict:
    return {"tool_calls": [{"name": SUBMIT, "arguments": {"code": CANDIDATE, "summary": "tools", "adoptions": []}}]}


def last_user(messages) -> str:
    return [m.content for m in messages if m.role == "user"][-1]


# -- text mode -----------------------------------------------------------------------------------
def test_text_mode_sends_no_tools_says_so_and_accepts_a_complete_reply():
    experiences = (retrieved("e-1", "restrict"), retrieved("e-2", "unroll"))
    reply = {
        "text": text_reply(CANDIDATE, "unrolled by 4", adopted=["e-1"], not_adopted=["e-2"]),
        "prompt_tokens": 900,
        "completion_tokens": 80,
    }
    llm, client = policy([reply], "text")
    proposal = llm.propose(turn(experiences=experiences, diagnose=lambda name, code: "PASS"))
    assert isinstance(proposal, Proposal)
    assert proposal.code.strip() == CANDIDATE.strip() and proposal.summary == "unrolled by 4"
    assert [(c.experience_id, c.adopted) for c in proposal.choices] == [("e-1", True), ("e-2", False)]
    assert (proposal.prompt_tokens, proposal.completion_tokens, proposal.case.calls) == (900, 80, [(900, 80)])
    messages, tools = client.calls[0]
    assert tools == []
    system = messages[0].content
    assert "text protocol" in system and "unavailable" in system and "```json" in system
    assert "submit_candidate" not in system
    assert "Here is my candidate." in proposal.journal and "```" not in proposal.journal


@pytest.mark.parametrize(
    ("broken", "named"),
    [
        (text_reply(CANDIDATE, "s").replace("Summary: s\n", ""), "Summary"),
        (text_reply(CANDIDATE, "s").replace("```python", "```"), "```python"),
        (text_reply(CANDIDATE, "s") + f"\n```python\n{CANDIDATE}\n```\n", "2 ```python blocks"),
    ],
)
def test_text_mode_asks_again_for_each_missing_or_broken_part(broken, named):
    fixed = text_reply(CANDIDATE, "s", adopted=["e-1"])
    llm, client = policy([broken, fixed], "text")
    proposal = llm.propose(turn(experiences=(retrieved("e-1", "restrict"),)))
    assert isinstance(proposal, Proposal) and len(client.calls) == 2
    messages, tools = client.calls[1]
    asked = last_user(messages)
    assert named in asked and "no tools can be called" in asked and "e-1" in asked
    assert tools == [] and [m.role for m in messages] == ["system", "user", "assistant", "user"]


@pytest.mark.parametrize(
    "record",
    [
        text_reply(CANDIDATE, "s", adopted=["e-1"]).replace('"e-1"]', '"e-1"'),  # not JSON
        text_reply(CANDIDATE, "s"),  # {"adopted": [], "not_adopted": []}: e-1 unaccounted for
    ],
)
def test_text_mode_evaluates_a_candidate_whose_record_is_incomplete_asking_once_for_the_record_alone(record):
    llm, client = policy([record, record, record], "text")
    proposal = llm.propose(turn(experiences=(retrieved("e-1", "restrict"),)))
    assert isinstance(proposal, Proposal) and proposal.code.strip() == CANDIDATE.strip()
    assert len(client.calls) == 2  # the candidate's reply, then one re-ask for the record alone
    asked = last_user(client.calls[1][0])
    assert "taken and will be evaluated" in asked and "e-1" in asked and "only a ```json block" in asked
    assert proposal.choices == () and proposal.case.not_stated == ["e-1"] and proposal.case.adoptions_owed == 1
    assert "- e-1: not stated" in proposal.journal and len(proposal.case.calls) == 2


def test_text_mode_takes_the_record_the_one_re_ask_gives():
    fixed = '```json\n{"adopted": [], "not_adopted": [{"id": "e-1", "why": "no loop to unroll"}]}\n```'
    llm, _ = policy([text_reply(CANDIDATE, "s"), fixed], "text")
    proposal = llm.propose(turn(experiences=(retrieved("e-1", "restrict"),)))
    assert [(c.experience_id, c.adopted) for c in proposal.choices] == [("e-1", False)]
    assert proposal.case.not_stated == [] and proposal.code.strip() == CANDIDATE.strip()


def test_text_mode_gives_up_after_the_reasks_with_every_calls_tokens():
    script = [{"text": "I would unroll it.", "prompt_tokens": 500, "completion_tokens": 20}] * 3
    llm, client = policy(script, "text", reasks=2)
    gave_up = llm.propose(turn())
    assert isinstance(gave_up, GaveUp) and len(client.calls) == 3
    assert (gave_up.prompt_tokens, gave_up.completion_tokens, gave_up.calls) == (1500, 60, ((500, 20),) * 3)
    assert gave_up.reason.startswith("the model answered 3 times in text without a usable python block / Summary line")
    assert "\n" not in gave_up.reason


def test_a_candidate_only_in_the_reasoning_is_never_taken():
    hidden = {
        "text": "Done thinking.",
        "reasoning": text_reply(CANDIDATE, "from reasoning"),
        "prompt_tokens": 100,
        "completion_tokens": 900,
    }
    llm, client = policy([hidden, text_reply(CANDIDATE, "from the answer")], "text")
    proposal = llm.propose(turn())
    assert proposal.summary == "from the answer" and len(client.calls) == 2
    assert proposal.case.calls[0] == (100, 900)  # the reasoning's tokens are counted
    assert "from reasoning" not in proposal.journal
    assert all("from reasoning" not in m.content for m in client.calls[1][0])  # and not sent back


def test_a_submit_call_inside_the_reasoning_is_not_a_tool_call():
    hidden = {"text": "", "reasoning": '{"name": "submit_candidate", "arguments": {"code": "class ModelNew: ..."}}'}
    llm, client = policy([hidden, submit()], "tools")
    assert llm.propose(turn()).summary == "tools" and len(client.calls) == 2


# -- auto ----------------------------------------------------------------------------------------
def test_auto_switches_to_text_when_the_endpoint_rejects_tools_and_the_turn_goes_on():
    said: list[str] = []
    llm, client = policy([REJECTED, text_reply(CANDIDATE, "in text")], said=said)
    proposal = llm.propose(turn(diagnose=lambda name, code: "PASS"))
    assert proposal.summary == "in text"
    assert [len(tools) for _, tools in client.calls] == [4, 0]
    assert "text protocol" in client.calls[1][0][0].content
    assert said == [
        "kiln: the endpoint rejected tool calls (400 Bad Request: registry.ollama.ai/library/gemma:2b "
        "does not support tools): replying in text from now on (--reply-protocol text)"
    ]
    assert llm.protocol.mode == "text"


def test_auto_switches_after_two_text_replies_in_a_row_and_reasks_in_text_for_free():
    said: list[str] = []
    llm, client = policy(
        ["I would unroll.", "Unroll by 4.", text_reply(CANDIDATE, "after the switch")], said=said, reasks=1
    )
    proposal = llm.propose(turn())
    assert proposal.summary == "after the switch" and len(client.calls) == 3  # the switch's re-ask spent no reask
    messages, tools = client.calls[2]
    assert tools == [] and "text protocol" in messages[0].content
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert "tool calls are not used any more" in last_user(messages) and "```python" in last_user(messages)
    assert said == [
        "kiln: the model answered twice in a row without calling a tool: replying in text from now "
        "on (--reply-protocol text)"
    ]


def test_a_turn_given_up_after_the_switch_counts_only_the_replies_made_in_text():
    llm, client = policy(["I would unroll.", "Unroll by 4.", "Still thinking."], reasks=1)
    gave_up = llm.propose(turn())
    assert isinstance(gave_up, GaveUp) and len(client.calls) == 3 and len(gave_up.calls) == 3
    assert gave_up.reason.startswith("the model answered once in text without a usable python block")


def test_the_reply_that_triggers_the_switch_is_taken_when_it_is_already_complete_text():
    llm, client = policy([text_reply(CANDIDATE, "first"), text_reply(CANDIDATE, "second")])
    assert llm.propose(turn()).summary == "second" and len(client.calls) == 2


def test_a_tool_call_between_text_replies_resets_the_count():
    diagnostic = {"tool_calls": [{"name": "run_checks", "arguments": {"code": CANDIDATE}}]}
    llm, _ = policy(["prose", diagnostic, "prose", submit()])
    assert llm.propose(turn(diagnose=lambda name, code: "PASS")).summary == "tools"
    assert llm.protocol.mode == "tools"


def test_the_switch_is_shared_and_said_once_for_the_whole_run():
    said: list[str] = []
    switch = ReplyProtocol("auto", say=said.append)
    cfg = config()
    first = LLMPolicy(
        cfg, ContextConfig(), "a1", client=ScriptedClient([REJECTED, text_reply(CANDIDATE)]), protocol=switch
    )
    second_client = ScriptedClient([text_reply(CANDIDATE)])
    second = LLMPolicy(cfg, ContextConfig(), "a2", client=second_client, protocol=switch)
    assert isinstance(first.propose(turn()), Proposal) and isinstance(second.propose(turn()), Proposal)
    assert second_client.calls[0][1] == []  # the other agent starts in text
    assert len(said) == 1


def test_every_policy_of_a_run_shares_one_switch_and_another_run_has_its_own():
    run = RunPolicies(config(), ContextConfig(), ScriptedClient([]))
    other = RunPolicies(config(), ContextConfig(), ScriptedClient([]))
    a1, a2 = run.make("a1", "t1"), run.make("a2", "t2")
    assert a1.protocol is a2.protocol is run.protocol
    assert other.make("a1", "t1").protocol is not a1.protocol


def test_the_default_switch_says_it_on_stderr_in_one_line(capsys):
    cfg = config()
    llm = LLMPolicy(cfg, ContextConfig(), "a1", client=ScriptedClient([REJECTED, text_reply(CANDIDATE)]))
    llm.propose(turn())
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kiln: the endpoint rejected tool calls (400")


# -- tools stays tools ---------------------------------------------------------------------------
def test_under_tools_a_rejection_is_an_error_naming_the_text_protocol():
    said: list[str] = []
    llm, _ = policy([REJECTED], "tools", said=said)
    with pytest.raises(ToolsRejected, match="use --reply-protocol text"):
        llm.propose(turn())
    assert said == []


def test_under_tools_text_replies_never_switch():
    llm, client = policy(["prose", "more prose", "still prose"], "tools", reasks=2)
    gave_up = llm.propose(turn())
    assert isinstance(gave_up, GaveUp) and "try --reply-protocol text" in gave_up.reason
    assert all(tools for _, tools in client.calls)


def test_a_400_that_does_not_name_tools_is_an_ordinary_error():
    llm, _ = policy([{"status": 400, "message": "maximum context length is 8192 tokens"}])
    with pytest.raises(LLMError) as raised:
        llm.propose(turn())
    assert not isinstance(raised.value, ToolsRejected) and llm.protocol.mode == "tools"


def test_replies_cut_off_while_reasoning_do_not_switch_auto_to_text():
    cut = {"text": "", "reasoning": "Let me think about the loop order " * 50, "finish_reason": "length"}
    llm, client = policy([cut, cut, submit()])
    assert llm.propose(turn()).summary == "tools" and llm.protocol.mode == "tools"
    assert "cut off at the output token limit" in last_user(client.calls[1][0])


def test_a_re_ask_that_would_leave_the_reply_under_its_room_drops_the_unusable_reply_it_answers():
    rambling = {"text": "I think the loop could be unrolled. " * 200}  # about 1,800 tokens, no candidate
    llm, client = policy([rambling, text_reply(CANDIDATE, "s")], "text")
    llm.window = 4096  # a local server's
    proposal = llm.propose(turn())
    assert isinstance(proposal, Proposal)
    messages, _ = client.calls[1]
    assert [m.role for m in messages] == ["system", "user", "user"]  # the rambling reply is not sent back
    assert "no ```python block" in messages[-1].content


def test_a_conversation_is_sized_by_the_servers_count_of_its_last_reply_not_by_the_estimate_alone():
    # A server that counts far more tokens than four characters each: its usage, not the estimate, says
    # that a re-ask after this reply would leave the next reply under its room.
    llm, client = policy(
        [{"text": "Unroll it."}, {"text": "Unroll it.", "prompt_tokens": 3300}, text_reply(CANDIDATE, "s")], "text"
    )
    llm.window = 4096
    assert isinstance(llm.propose(turn()), Proposal)
    assert [m.role for m in client.calls[1][0]] == ["system", "user", "assistant", "user"]  # the estimate: room
    assert [m.role for m in client.calls[2][0]] == ["system", "user", "user"]  # the server's 3300: no room
