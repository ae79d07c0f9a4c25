"""The llm policy against a server whose window is smaller than configured and reported nowhere."""

from __future__ import annotations

from kernelkiln.agents.config import LLMPolicyConfig
from kernelkiln.agents.llm import SUBMIT, LLMPolicy
from kernelkiln.context.config import ContextConfig
from kernelkiln.policy.turn import GaveUp, Proposal
from kernelkiln.testing.llm import LoopbackServer
from kernelkiln.testing.turns import START_CODE, make_turn, retrieved

CANDIDATE = START_CODE.replace("def forward", "# vectorized\n    def forward")
KNOWLEDGE = "Platform notes: " + "keep loads contiguous and the inner loop free of branches. " * 400
SUBMITTED = {"tool_calls": [{"name": SUBMIT, "arguments": {"code": CANDIDATE, "summary": "fits", "adoptions": []}}]}


def policy(server: LoopbackServer) -> LLMPolicy:
    llm = {"model": "m", "base_url": server.base_url, "max_retries": 0, "reply_protocol": "tools"}
    return LLMPolicy(LLMPolicyConfig(llm={**llm, "max_output_tokens": 1024}), ContextConfig(), "a1")


def turn():
    return make_turn(parent_id="a-parent", knowledge=(retrieved("k-1", KNOWLEDGE, kind="knowledge"),))


def test_a_refusal_naming_the_window_rebuilds_the_prompt_for_it_and_the_turn_goes_on(monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with LoopbackServer([SUBMITTED], window=4000, refusal="llama.cpp") as server:
        llm = policy(server)
        proposal = llm.propose(turn())
    assert isinstance(proposal, Proposal) and proposal.summary == "fits"
    first, second = (r.body["messages"][-1]["content"] for r in server.requests)
    assert "keep loads contiguous" in first and "keep loads contiguous" not in second  # built for 4000 tokens
    assert llm.window == 4000
    assert "context window is 4000 tokens" in capsys.readouterr().err


def test_a_window_too_small_for_the_task_itself_gives_the_turn_up_with_the_reason(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with LoopbackServer([SUBMITTED], window=600, refusal="llama.cpp") as server:
        gave_up = policy(server).propose(turn())
    # The refusal named 600 tokens; even the minimal prompt leaves under 512 of them: no second request.
    assert isinstance(gave_up, GaveUp) and "window of 600" in gave_up.reason
    assert "a window of at least" in gave_up.reason
    assert len(server.requests) == 1 and server.remaining == 1


def test_a_window_smaller_than_the_prompt_plus_the_reply_cap_is_used_and_the_reply_gets_what_it_leaves(
    monkeypatch,
):
    # A local server's 4,096 with the default 4,096-token reply cap: the prompt is built for half
    # the window, and the request's max_tokens is what the window leaves after it.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with LoopbackServer([SUBMITTED]) as server:
        llm = {"model": "m", "base_url": server.base_url, "max_retries": 0, "reply_protocol": "tools"}
        config = LLMPolicyConfig(llm={**llm, "context_window": 4096, "max_output_tokens": 4096})
        proposal = LLMPolicy(config, ContextConfig(), "a1").propose(turn())
    assert isinstance(proposal, Proposal) and proposal.summary == "fits"
    (request,) = server.requests
    assert 256 <= request.body["max_tokens"] < 4096


def test_a_reply_cut_at_a_window_reported_nowhere_teaches_it_and_the_turn_is_built_again_for_it(monkeypatch, capsys):
    # llama-cpp-python at --n_ctx 4096 serves what fits alone and cuts the reply at the window, without an
    # error; the run assumed 128,000 tokens. The cut reply's usage says the window: one cut, then requests fit.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with LoopbackServer([SUBMITTED] * 3, window=4096, refusal="llama-cpp-python", chars_per_token=3) as server:
        llm = LLMPolicy(
            LLMPolicyConfig(
                llm={"model": "m", "base_url": server.base_url, "max_retries": 0, "reply_protocol": "tools"}
            ),
            ContextConfig(),
            "a1",
        )
        proposal = llm.propose(make_turn(parent_id="a-parent"))  # a prompt that fits the window alone
        bodies = [r.body for r in server.requests]
        prompts = [server._count(*_parsed(b)) for b in bodies]
    assert isinstance(proposal, Proposal) and proposal.summary == "fits" and llm.window == 4096
    assert len(bodies) == 2 and prompts[0] + bodies[0]["max_tokens"] > 4096  # the first: cut
    assert prompts[1] + bodies[1]["max_tokens"] <= 4096 and bodies[1]["max_tokens"] >= 1024  # then it fits
    assert proposal.prompt_tokens == prompts[0] + prompts[1]  # the cut reply's tokens are counted too
    assert "cut a reply at 4096 tokens" in capsys.readouterr().err


def _parsed(body):
    from kernelkiln.testing.llm import _from_openai

    return _from_openai(body)
