"""LLMConfig: the client timeout a local CPU server needs, unless set."""

from __future__ import annotations

import pytest

from kernelkiln.llm import LLMConfig
from kernelkiln.llm.config import LOCAL_TIMEOUT_S, REMOTE_TIMEOUT_S


@pytest.mark.parametrize(
    "base_url, timeout",
    [
        ("http://localhost:8080/v1", LOCAL_TIMEOUT_S),
        ("http://127.0.0.1:11434/v1", LOCAL_TIMEOUT_S),
        ("https://api.deepseek.com/v1", REMOTE_TIMEOUT_S),
        (None, REMOTE_TIMEOUT_S),
    ],
)
def test_the_timeout_defaults_to_minutes_on_this_machine_and_to_two_minutes_elsewhere(base_url, timeout):
    assert LLMConfig(model="m", base_url=base_url).timeout_s == timeout
    assert LOCAL_TIMEOUT_S > REMOTE_TIMEOUT_S


def test_a_timeout_that_is_set_is_kept_and_still_checked():
    assert LLMConfig(model="m", base_url="http://localhost:8080/v1", timeout_s=45).timeout_s == 45
    assert LLMConfig.model_validate({"model": "m", "timeout_s": 900}).timeout_s == 900
    with pytest.raises(ValueError, match="greater than 0"):
        LLMConfig(model="m", timeout_s=0)
