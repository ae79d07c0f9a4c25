"""Refusals for length, as each server words them, read for the window they name."""

from __future__ import annotations

import pytest

from kernelkiln.llm.overflow import ContextExceeded, read_refusal


@pytest.mark.parametrize(
    ("status", "body", "window", "prompt"),
    [
        (  # vLLM and llama-cpp-python's server
            400,
            {
                "object": "error",
                "message": "This model's maximum context length is 8192 tokens. However, you requested 8539 tokens "
                "(4443 in the messages, 4096 in the completion). Please reduce the length of the messages or "
                "completion.",
            },
            8192,
            4443,
        ),
        (  # newer vLLM
            400,
            {
                "message": "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum context "
                "length is 8192 tokens and your request has 4443 input tokens (4096 > 8192 - 4443)."
            },
            8192,
            4443,
        ),
        (  # OpenAI
            400,
            {
                "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
                "130000 tokens. Please reduce the length of the messages.",
                "code": "context_length_exceeded",
            },
            128000,
            130000,
        ),
        (  # SGLang
            400,
            {
                "message": "Requested token count exceeds the model's maximum context length of 8192 tokens. You "
                "requested a total of 8539 tokens: 4443 tokens from the input messages and 4096 tokens for the "
                "completion. Please reduce the number of tokens in the input messages or the completion to fit "
                "within the limit."
            },
            8192,
            4443,
        ),
        (  # llama-server
            400,
            {
                "code": 400,
                "message": "request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it",
                "type": "exceed_context_size_error",
            },
            4096,
            4476,
        ),
        (  # older llama-server: the numbers beside the message, the body as the SDK passes it on
            400,
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 4225,
                    "n_ctx": 4096,
                }
            },
            4096,
            4225,
        ),
        (  # LM Studio
            400,
            {
                "error": "Trying to keep the first 5000 tokens when context the overflows. However, the model is "
                "loaded with context length of only 4096 tokens, which is not enough."
            },
            4096,
            5000,
        ),
        (  # TGI
            422,
            {
                "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8192. Given: 8000 "
                "`inputs` tokens and 4096 `max_new_tokens`",
                "error_type": "validation",
            },
            8192,
            8000,
        ),
        (
            400,
            {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"},
            200000,
            210000,
        ),
        (
            400,
            {
                "type": "invalid_request_error",
                "message": "input length and `max_tokens` exceed context limit: 198000 + 4096 > 200000, decrease "
                "input length or `max_tokens` and try again",
            },
            200000,
            198000,
        ),
    ],
)
def test_each_servers_refusal_names_the_window_and_the_prompt(status, body, window, prompt):
    refusal = read_refusal(status, body)
    assert refusal is not None and (refusal.window, refusal.prompt_tokens) == (window, prompt)
    assert "\n" not in refusal.message


def test_other_errors_are_no_refusal_for_length():
    assert read_refusal(400, {"message": "tools param requires --jinja flag"}) is None
    assert read_refusal(401, {"message": "This model's maximum context length is 8192 tokens."}) is None
    assert read_refusal(500, {"message": "This model's maximum context length is 8192 tokens."}) is None
    assert read_refusal(400, "not json at all") is None


def test_a_refusal_made_again_from_its_message_alone_reads_its_window_and_prompt_back():
    """A replay raises a recorded ContextExceeded from its one line: the window must survive the trip."""
    said = ContextExceeded(
        "llm endpoint x: the prompt has 4225 tokens, more than the context window of 4096 tokens", 4096, 4225
    )
    again = ContextExceeded(str(said))
    assert (again.window, again.prompt_tokens) == (4096, 4225)
    with pytest.raises(TypeError):
        ContextExceeded("a message that names no window")
