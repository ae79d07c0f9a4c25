"""The chat records and the LLM configuration."""

import pytest
from pydantic import ValidationError

from kernelkiln.llm import Completion, LLMConfig, Message, ToolCall, ToolSpec
from kernelkiln.llm.messages import parse_arguments


def test_records_round_trip_through_json():
    call = ToolCall(id="c1", name="compile", arguments={"code": "x", "flags": ["-O3"]})
    records = [
        ToolSpec(name="compile", description="Compile.", parameters={"type": "object", "properties": {}}),
        call,
        Message(role="assistant", content="", tool_calls=(call,)),
        Message(role="tool", content="ok", tool_call_id="c1", name="compile"),
        Completion(
            text="t",
            tool_calls=(call,),
            prompt_tokens=3,
            completion_tokens=4,
            cost_usd=0.5,
            model="m",
            finish_reason="tool_calls",
            seconds=1.5,
            attempts=2,
        ),
    ]
    for record in records:
        assert type(record).model_validate_json(record.model_dump_json()) == record


def test_records_are_frozen_and_tolerate_unknown_fields():
    message = Message.model_validate({"role": "user", "content": "hi", "added_later": 1})
    assert message == Message(role="user", content="hi")
    with pytest.raises(ValidationError):
        message.content = "changed"


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ('{"a": 1}', {"a": 1}),
        ("", {}),
        (None, {}),
        ({"a": 1}, {"a": 1}),
        ("{broken", {"_raw": "{broken"}),
        ("[1, 2]", {"_raw": "[1, 2]"}),
    ],
)
def test_tool_arguments_that_are_not_a_json_object_are_kept_raw(raw, parsed):
    assert parse_arguments(raw) == parsed


def test_completion_becomes_the_assistant_message():
    call = ToolCall(id="c1", name="compile")
    completion = Completion(text="hm", tool_calls=(call,), prompt_tokens=2, completion_tokens=3)
    assert completion.as_message() == Message(role="assistant", content="hm", tool_calls=(call,))
    assert completion.total_tokens == 5


def test_config_rejects_unknown_fields_and_documents_every_field():
    with pytest.raises(ValidationError):
        LLMConfig(model="m", api_key="sk-should-never-be-here")
    assert all(field.description for field in LLMConfig.model_fields.values())


def test_config_computes_cost_from_prices_per_million_tokens():
    config = LLMConfig(model="m", price_prompt_per_mtok=0.5, price_completion_per_mtok=1.5)
    assert config.cost_usd(2_000_000, 1_000_000) == pytest.approx(2.5)
    assert config.key_env == "OPENAI_API_KEY"
    assert LLMConfig(provider="anthropic", model="m").key_env == "ANTHROPIC_API_KEY"
