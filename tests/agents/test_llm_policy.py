"""The llm policy in the tools protocol: submit_candidate, adoption records, re-asks, diagnostic tools and tokens.

The text protocol and auto's switch are in test_reply_protocol.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kernelkiln.agents import llm as llm_module
from kernelkiln.agents.config import LLMPolicyConfig
from kernelkiln.agents.llm import DIAGNOSTICS, SUBMIT, LLMPolicy
from kernelkiln.agents.spent import Spent
from kernelkiln.context.config import ContextConfig
from kernelkiln.guard import diagnose
from kernelkiln.llm.fit import MIN_REPLY_TOKENS
from kernelkiln.policy.turn import GaveUp, code_hash
from kernelkiln.store.records import SUMMARY_CHARS
from kernelkiln.testing.llm import LoopbackServer, ScriptedClient
from kernelkiln.testing.turns import START_CODE, make_turn, retrieved

CANDIDATE = START_CODE.replace("def forward", "# vectorized\n    def forward")


def config(**fields) -> LLMPolicyConfig:
    llm = fields.pop("llm", {"model": "m", "base_url": "http://127.0.0.1:9/v1", "reply_protocol": "tools"})
    return LLMPolicyConfig(llm=llm, **fields)


def policy(script, **fields) -> tuple[LLMPolicy, ScriptedClient]:
    client = ScriptedClient(script)
    return LLMPolicy(config(**fields), ContextConfig(), "a1", client=client), client


def later_turn(**overrides):
    """A turn past the seed: the working code came from an earlier attempt."""
    return make_turn(parent_id="a-parent", **overrides)


def submit(code: str = CANDIDATE, summary: str = "restrict pointers and unroll", adoptions=(), **reply):
    arguments = {"code": code, "summary": summary, "adoptions": list(adoptions)}
    return {"tool_calls": [{"name": SUBMIT, "arguments": arguments}], **reply}


def adoption(experience_id: str, adopted: bool, why: str = "because") -> dict:
    return {"experience_id": experience_id, "adopted": adopted, "why": why}


def diagnostic(name: str = "run_checks", code: str = CANDIDATE, call_id: str | None = None) -> dict:
    call = {"name": name, "arguments": {"code": code}}
    if call_id:
        call["id"] = call_id
    return {"tool_calls": [call]}


def user_messages(messages) -> list[str]:
    return [m.content for m in messages if m.role == "user"]


# -- the seed ----------------------------------------------------------------------------------
def test_first_turn_with_seed_code_proposes_the_seed_without_calling_the_model():
    llm, client = policy([])
    proposal = llm.propose(make_turn())
    assert proposal.code == START_CODE
    assert proposal.case.move == "seed"
    assert proposal.parent_id is None
    assert client.calls == []
    assert (proposal.prompt_tokens, proposal.completion_tokens) == (0, 0)


def test_a_seed_the_run_already_evaluated_goes_to_the_model():
    llm, client = policy([submit()])
    proposal = llm.propose(make_turn(evaluated=frozenset({code_hash(START_CODE)})))
    assert proposal.case.move == "llm"
    assert len(client.calls) == 1


# -- a complete submit -------------------------------------------------------------------------
def test_a_complete_submit_becomes_a_proposal_with_choices_in_shown_order():
    turn = later_turn(experiences=(retrieved("e-1", "mark pointers restrict"), retrieved("e-2", "unroll by 4")))
    reply = submit(
        adoptions=[adoption("e-2", False, "no loop to unroll"), adoption("e-1", True, "did it")],
        prompt_tokens=1200,
        completion_tokens=300,
    )
    llm, _ = policy([reply])
    proposal = llm.propose(turn)
    assert proposal.code == CANDIDATE
    assert proposal.summary == "restrict pointers and unroll"
    assert proposal.parent_id == "a-parent"
    assert [(c.experience_id, c.adopted, c.why) for c in proposal.choices] == [
        ("e-1", True, "did it"),
        ("e-2", False, "no loop to unroll"),
    ]
    assert (proposal.prompt_tokens, proposal.completion_tokens) == (1200, 300)
    assert (proposal.case.move, proposal.case.calls) == ("llm", [(1200, 300)])
    assert "e-1: adopted" in proposal.journal and "e-2: not adopted" in proposal.journal


def test_the_prompt_names_the_shown_experiences_and_offers_every_tool_when_diagnose_is_given():
    turn = later_turn(experiences=(retrieved("e-1", "mark pointers restrict"),), diagnose=lambda name, code: "PASS")
    llm, client = policy([submit(adoptions=[adoption("e-1", True)])])
    llm.propose(turn)
    messages, tools = client.calls[0]
    assert [m.role for m in messages] == ["system", "user"]
    assert "e-1" in messages[1].content
    assert {t.name for t in tools} == {SUBMIT, *DIAGNOSTICS}


def test_tools_yaml_describes_submit_and_every_guard_diagnostic_and_nothing_else():
    described = yaml.safe_load((Path(llm_module.__file__).with_name("tools.yaml")).read_text())
    assert list(described) == [SUBMIT, *diagnose.TOOLS]
    assert (
        f"at most {SUMMARY_CHARS} characters" in described[SUBMIT]["parameters"]["properties"]["summary"]["description"]
    )


def test_without_diagnose_only_submit_candidate_is_offered():
    llm, client = policy([submit()])
    llm.propose(later_turn())
    _, tools = client.calls[0]
    assert [t.name for t in tools] == [SUBMIT]


def test_a_summary_longer_than_160_characters_is_clipped_to_160():
    llm, _ = policy([submit(summary="x" * 400)])
    proposal = llm.propose(later_turn())
    assert proposal.summary == "x" * 160


def test_whitespace_in_the_summary_is_collapsed_to_one_line():
    llm, _ = policy([submit(summary="tile\n  the   rows\n")])
    assert llm.propose(later_turn()).summary == "tile the rows"


def test_adoption_reasons_are_kept_and_extra_ids_are_ignored():
    turn = later_turn(experiences=(retrieved("e-1", "restrict"),))
    llm, _ = policy([submit(adoptions=[adoption("e-1", True, "used"), adoption("e-ghost", True)])])
    proposal = llm.propose(turn)
    assert [c.experience_id for c in proposal.choices] == ["e-1"]


def test_every_call_is_recorded_with_its_tokens():
    llm, client = policy([submit(prompt_tokens=50, completion_tokens=7)])
    proposal = llm.propose(later_turn(turn=3))
    assert len(client.calls) == 1
    assert (proposal.prompt_tokens, proposal.completion_tokens) == (50, 7)


# -- re-asks -----------------------------------------------------------------------------------
def test_a_reply_without_submit_is_asked_again_naming_the_problem():
    llm, client = policy(
        [
            {"text": "I would tile it.", "prompt_tokens": 100, "completion_tokens": 10},
            submit(prompt_tokens=150, completion_tokens=40),
        ]
    )
    proposal = llm.propose(later_turn())
    assert proposal is not None
    assert len(client.calls) == 2
    reask = user_messages(client.calls[1][0])[-1]
    assert "could not be used" in reask
    assert "did not call submit_candidate" in reask
    assert (proposal.prompt_tokens, proposal.completion_tokens) == (250, 50)
    assert proposal.case.calls == [(100, 10), (150, 40)]
    assert "I would tile it." in proposal.journal


def test_the_conversation_keeps_the_failed_reply_before_the_reask():
    llm, client = policy(["thinking out loud", submit()])
    llm.propose(later_turn())
    messages, _ = client.calls[1]
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2].content == "thinking out loud"


def test_after_reasks_failures_propose_gives_up_counting_every_call():
    script = [{"text": t, "prompt_tokens": 100, "completion_tokens": 10} for t in ("no tool", "still no tool", "nope")]
    llm, client = policy(script, reasks=2)
    gave_up = llm.propose(later_turn())
    assert isinstance(gave_up, GaveUp)
    assert len(client.calls) == 3
    assert (gave_up.prompt_tokens, gave_up.completion_tokens, gave_up.calls) == (300, 30, ((100, 10),) * 3)
    assert gave_up.reason == (
        "the model answered 3 times without calling submit_candidate; this endpoint may not "
        "support tool calls: try --reply-protocol text"
    )


def test_with_zero_reasks_one_bad_reply_gives_up():
    llm, client = policy(["no tool"], reasks=0)
    assert "answered once without calling submit_candidate" in llm.propose(later_turn()).reason
    assert len(client.calls) == 1


def test_incomplete_submits_give_up_naming_what_they_lacked():
    llm, _ = policy([submit(summary=" ")] * 2, reasks=1)
    gave_up = llm.propose(later_turn())
    assert "no complete submit_candidate call in 2 replies" in gave_up.reason
    assert "`summary` is missing" in gave_up.reason and len(gave_up.calls) == 2


def test_a_submit_missing_an_adoption_record_is_taken_and_the_record_alone_asked_for_once():
    turn = later_turn(experiences=(retrieved("e-1", "restrict"), retrieved("e-2", "unroll")))
    first = submit(adoptions=[adoption("e-1", True)])
    llm, client = policy([first, submit(code="other", adoptions=[adoption("e-1", True), adoption("e-2", False)])])
    proposal = llm.propose(turn)
    assert proposal.code == first["tool_calls"][0]["arguments"]["code"]  # the first reply's candidate
    assert [c.experience_id for c in proposal.choices] == ["e-1", "e-2"] and proposal.case.not_stated == []
    messages, _ = client.calls[1]
    tool_answer = next(m for m in messages if m.role == "tool")
    assert tool_answer.content.startswith("taken") and "no adoption record for e-2" in tool_answer.content
    assert "e-2" in user_messages(messages)[-1] and "e-1" not in user_messages(messages)[-1]


def test_a_model_that_never_states_adoption_still_has_its_candidate_evaluated():
    # The case: {"adopted": [], "not_adopted": []} with experiences shown, every time.
    turn = later_turn(experiences=(retrieved("e-1", "restrict"), retrieved("e-2", "unroll")))
    llm, client = policy([submit(adoptions=[])] * 3)
    proposal = llm.propose(turn)
    assert not isinstance(proposal, GaveUp) and len(client.calls) == 2
    assert proposal.choices == () and proposal.case.not_stated == ["e-1", "e-2"]
    assert proposal.case.adoptions_owed == 2 and "- e-2: not stated" in proposal.journal


def test_a_submit_without_model_new_is_asked_again():
    llm, client = policy([submit(code="print('hi')"), submit()])
    assert llm.propose(later_turn()).code == CANDIDATE
    assert "ModelNew" in user_messages(client.calls[1][0])[-1]


def test_a_submit_with_an_empty_summary_is_asked_again():
    llm, client = policy([submit(summary="  "), submit()])
    llm.propose(later_turn())
    assert "summary" in user_messages(client.calls[1][0])[-1]


def test_a_submit_with_malformed_arguments_is_asked_again():
    llm, client = policy([{"tool_calls": [{"name": SUBMIT, "arguments": "{not json"}]}, submit()])
    assert llm.propose(later_turn()) is not None
    assert "not a JSON object" in user_messages(client.calls[1][0])[-1]


def test_a_submit_with_badly_shaped_adoptions_is_asked_again():
    turn = later_turn(experiences=(retrieved("e-1", "restrict"),))
    llm, client = policy(
        [submit(adoptions=[{"experience_id": "e-1", "adopted": "yes"}]), submit(adoptions=[adoption("e-1", False)])]
    )
    assert llm.propose(turn).choices[0].adopted is False
    assert "e-1" in user_messages(client.calls[1][0])[-1]


# -- diagnostic tools --------------------------------------------------------------------------
def test_a_diagnostic_call_is_answered_through_turn_diagnose_then_the_submit_is_accepted():
    asked = []

    def diagnose(name: str, code: str) -> str:
        asked.append((name, code))
        return "PASS: correct on all 2 workload(s)"

    llm, client = policy([diagnostic("run_checks", call_id="call_checks"), submit()])
    proposal = llm.propose(later_turn(diagnose=diagnose))
    assert proposal.code == CANDIDATE
    assert asked == [("run_checks", CANDIDATE)]
    messages, _ = client.calls[1]
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool"]
    tool = messages[-1]
    assert tool.tool_call_id == "call_checks" and tool.name == "run_checks"
    assert tool.content == "PASS: correct on all 2 workload(s)"
    assert len(proposal.case.calls) == 2


@pytest.mark.parametrize("name", DIAGNOSTICS)
def test_each_diagnostic_tool_reaches_diagnose_by_name(name):
    asked = []
    llm, _ = policy([diagnostic(name), submit()])
    llm.propose(later_turn(diagnose=lambda tool, code: asked.append(tool) or "report"))
    assert asked == [name]


def test_a_diagnostic_call_without_code_is_told_so_and_diagnose_is_not_called():
    asked = []
    reply = {"tool_calls": [{"name": "run_checks", "arguments": {}}]}
    llm, client = policy([reply, submit()])
    llm.propose(later_turn(diagnose=lambda tool, code: asked.append(tool) or "report"))
    assert asked == []
    assert "needs `code`" in client.calls[1][0][-1].content


def test_diagnostic_calls_beyond_the_limit_get_no_calls_left():
    asked = []
    script = [diagnostic(call_id="c1"), diagnostic(call_id="c2"), submit()]
    llm, client = policy(script, tool_calls=1)
    proposal = llm.propose(later_turn(diagnose=lambda tool, code: asked.append(tool) or "PASS"))
    assert proposal is not None
    assert asked == ["run_checks"]
    answers = {m.tool_call_id: m.content for m in client.calls[2][0] if m.role == "tool"}
    assert answers["c1"] == "PASS"
    assert answers["c2"].startswith("no diagnostic calls left")


def test_with_no_diagnostic_calls_allowed_the_first_one_is_refused():
    asked = []
    llm, client = policy([diagnostic(call_id="c1"), submit()], tool_calls=0)
    assert llm.propose(later_turn(diagnose=lambda tool, code: asked.append(tool) or "PASS")) is not None
    assert asked == []
    tool = next(m for m in client.calls[1][0] if m.role == "tool")
    assert tool.tool_call_id == "c1" and "no diagnostic calls left" in tool.content


def test_every_tool_call_of_a_reply_gets_its_own_answer():
    reply = {
        "tool_calls": [
            {"name": "run_checks", "arguments": {"code": CANDIDATE}, "id": "a"},
            {"name": "profile", "arguments": {"code": CANDIDATE}, "id": "b"},
        ]
    }
    llm, client = policy([reply, submit()])
    llm.propose(later_turn(diagnose=lambda tool, code: f"{tool} report"))
    answers = {m.tool_call_id: m.content for m in client.calls[1][0] if m.role == "tool"}
    assert answers == {"a": "run_checks report", "b": "profile report"}


def test_an_unknown_tool_is_answered_with_the_tools_on_offer():
    reply = {"tool_calls": [{"name": "shell", "arguments": {"cmd": "ls"}, "id": "x"}]}
    llm, client = policy([reply, submit()])
    assert llm.propose(later_turn()) is not None
    tool = next(m for m in client.calls[1][0] if m.role == "tool")
    assert "unknown tool 'shell'" in tool.content and SUBMIT in tool.content


def test_a_callable_reply_sees_the_conversation_so_far():
    seen = []

    def reply(messages, tools):
        seen.append([m.role for m in messages])
        return submit()

    llm, _ = policy([diagnostic(), reply])
    llm.propose(later_turn(diagnose=lambda tool, code: "PASS"))
    assert seen == [["system", "user", "assistant", "tool"]]


def test_diagnostic_calls_without_diagnose_are_bounded_by_the_reasks():
    llm, client = policy([diagnostic()] * 10, reasks=2, tool_calls=4)
    assert isinstance(llm.propose(later_turn()), GaveUp)
    assert len(client.calls) <= 3 + 4


# -- through the real openai SDK ---------------------------------------------------------------
def test_end_to_end_through_the_loopback_server_with_a_diagnostic_then_a_submit(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    asked = []
    script = [
        diagnostic("run_checks", call_id="call_1"),
        submit(summary="checked then submitted", prompt_tokens=900, completion_tokens=60),
    ]
    with LoopbackServer(script) as server:
        cfg = config(llm={"model": "m", "base_url": server.base_url, "max_retries": 0, "reply_protocol": "tools"})
        llm = LLMPolicy(cfg, ContextConfig(), "a1")
        proposal = llm.propose(later_turn(diagnose=lambda tool, code: asked.append(tool) or "PASS: all good"))
    assert proposal is not None and proposal.summary == "checked then submitted"
    assert asked == ["run_checks"]
    assert len(server.requests) == 2
    first, second = (r.body for r in server.requests)
    assert {t["function"]["name"] for t in first["tools"]} == {SUBMIT, *DIAGNOSTICS}
    assert first["model"] == "m"
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 1
    assert tool_messages[0]["tool_call_id"] == "call_1"
    assert tool_messages[0]["content"] == "PASS: all good"
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    assert assistant["tool_calls"][0]["id"] == "call_1"
    assert proposal.case.calls[1] == (900, 60)


# -- the model's context window ------------------------------------------------------------------
def small_window(window: int, script: list) -> tuple[LLMPolicy, ScriptedClient, list[str]]:
    said: list[str] = []
    llm, client = policy(
        script,
        llm={
            "model": "m",
            "base_url": "http://127.0.0.1:9/v1",
            "reply_protocol": "tools",
            "context_window": window,
            "max_output_tokens": 1024,
        },
    )
    llm._say = said.append
    return llm, client, said


def test_a_window_the_full_prompt_does_not_fit_gets_the_minimal_prompt_in_text_without_tools():
    text = {"text": f"```python\n{CANDIDATE}\n```\nSummary: restrict pointers\n"}
    llm, client, said = small_window(1500, [text])
    proposal = llm.propose(later_turn(experiences=(retrieved("e-1", "restrict"),)))
    assert not isinstance(proposal, GaveUp) and proposal.case.prompt_tier == "minimal"
    ((messages, tools),) = client.calls
    assert tools == [] and "Retrieved experiences" not in messages[1].content  # no layer of context
    assert "```python" in messages[0].content and "submit_candidate" not in messages[0].content
    assert proposal.case.adoptions_owed == 0  # nothing was shown, so nothing is owed
    assert len(said) == 1 and "minimal prompts" in said[0] and "window of 1500" in said[0]


def test_a_window_even_the_minimal_prompt_does_not_fit_is_refused_before_any_request_naming_the_window_needed():
    llm, client, _ = small_window(700, [submit()])
    gave_up = llm.propose(later_turn())
    assert isinstance(gave_up, GaveUp) and client.calls == [] and gave_up.calls == ()
    assert "window of 700" in gave_up.reason and "a window of at least" in gave_up.reason
    assert "\n" not in gave_up.reason


def _window_llm(window: int, generation: int) -> dict:
    return {
        "model": "m",
        "base_url": "http://127.0.0.1:9/v1",
        "context_window": window,
        "max_output_tokens": generation,
        "reply_protocol": "tools",
    }


def test_re_asks_after_long_useless_replies_drop_them_so_every_request_leaves_the_reply_its_room():
    window, generation = 4000, 1024
    first = llm_module.LLMPolicy(
        config(llm=_window_llm(window, generation)), ContextConfig(), "a1", client=ScriptedClient([])
    )
    prompt = first._open(later_turn(), "tools", Spent())
    sent = first.estimator.estimate("".join(m.content for m in prompt.messages))
    # Each useless reply is long prose: kept, two of them would leave no room for a reply.
    chatter = {"text": "x" * (4 * (window - sent) // 2)}
    llm, client = policy([chatter] * 4 + [submit()], reasks=8, llm=_window_llm(window, generation))
    proposal = llm.propose(later_turn())
    assert not isinstance(proposal, GaveUp) and len(client.calls) == 5
    for messages, tools in client.calls:
        text = "".join(m.content for m in messages) + "".join(t.model_dump_json() for t in tools)
        assert llm.estimator.estimate(text) + generation <= window
    assert [m.role for m in client.calls[-1][0]] == ["system", "user", "user"]  # the chatter was dropped


def test_a_conversation_of_tool_rounds_that_outgrows_the_window_stops_before_it_is_sent():
    window, generation = 4000, 1024
    llm, client = policy([diagnostic()] * 6, tool_calls=6, llm=_window_llm(window, generation))
    gave_up = llm.propose(later_turn(diagnose=lambda name, code: "x" * 4000))  # each report ~1,000 tokens
    assert isinstance(gave_up, GaveUp) and "the conversation, after" in gave_up.reason
    assert 1 <= len(client.calls) < 6  # stopped for the window, not for the tool-call budget
    for messages, tools in client.calls:
        text = "".join(m.content for m in messages) + "".join(t.model_dump_json() for t in tools)
        assert llm.estimator.estimate(text) + MIN_REPLY_TOKENS <= window
