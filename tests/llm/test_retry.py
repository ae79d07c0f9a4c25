"""The shared retry loop, without any SDK."""

import email.utils
import random

import pytest

from kernelkiln.llm import LLMConfig, LLMError
from kernelkiln.llm.retry import (
    Failure,
    backoff_s,
    call_with_retries,
    is_retryable_status,
    one_line,
    retry_after_s,
    status_failure,
)
from kernelkiln.testing.llm import MaxJitter, RecordedSleep

ENDPOINT = "http://llm.example/v1"


class Flaky(Exception):
    def __init__(self, failure):
        self.failure = failure


def flaky(*failures, result="done"):
    """A call that raises one Flaky per failure, then returns ``result``; and its call counter."""
    pending = list(failures)
    counter = {"calls": 0}

    def call():
        counter["calls"] += 1
        if pending:
            raise Flaky(pending.pop(0))
        return result

    return call, counter


def run(call, config=None, sleep=None, rng=None):
    return call_with_retries(
        call,
        lambda exc: exc.failure if isinstance(exc, Flaky) else None,
        config=config or LLMConfig(model="m"),
        endpoint=ENDPOINT,
        sleep=sleep or RecordedSleep(),
        rng=rng or MaxJitter(),
    )


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
def test_retries_timeouts_conflicts_rate_limits_and_server_errors(status):
    assert is_retryable_status(status)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_never_retries_other_client_errors(status):
    assert not is_retryable_status(status)


def test_returns_the_result_and_the_tries_it_took():
    call, counter = flaky(status_failure(500), status_failure(502))
    assert run(call) == ("done", 3)
    assert counter["calls"] == 3


def test_backoff_doubles_from_the_first_delay_up_to_the_cap():
    sleep = RecordedSleep()
    config = LLMConfig(model="m", backoff_s=1.0, max_backoff_s=5.0, max_retries=6)
    call, _ = flaky(*[status_failure(503)] * 5)
    run(call, config, sleep)
    assert sleep.delays == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_backoff_is_jittered_within_its_bound():
    config = LLMConfig(model="m", backoff_s=1.0, max_backoff_s=30.0)
    rng = random.Random(7)
    delays = [backoff_s(3, config, rng) for _ in range(200)]
    assert all(0.0 <= d <= 8.0 for d in delays)
    assert len(set(delays)) > 100


def test_honours_retry_after_capped_at_max_backoff():
    sleep = RecordedSleep()
    config = LLMConfig(model="m", max_backoff_s=10.0)
    call, _ = flaky(Failure("429", True, retry_after_s=0.0), Failure("429", True, retry_after_s=99.0))
    run(call, config, sleep)
    assert sleep.delays == [0.0, 10.0]


def test_fails_at_once_on_a_non_retryable_failure():
    sleep = RecordedSleep()
    call, counter = flaky(status_failure(401), status_failure(500))
    with pytest.raises(LLMError) as error:
        run(call, sleep=sleep)
    assert str(error.value) == f"llm endpoint {ENDPOINT} failed: 401 Unauthorized"
    assert counter["calls"] == 1 and sleep.delays == []


def test_fails_after_the_last_try_with_one_line_naming_endpoint_tries_and_cause():
    config = LLMConfig(model="m", max_retries=4)
    call, counter = flaky(*[status_failure(503)] * 5)
    with pytest.raises(LLMError) as error:
        run(call, config)
    assert str(error.value) == f"llm endpoint {ENDPOINT} failed after 5 tries: 503 Service Unavailable"
    assert error.value.__cause__ is None and error.value.__suppress_context__
    assert counter["calls"] == 5


def test_a_single_try_is_called_a_try():
    call, _ = flaky(status_failure(500))
    with pytest.raises(LLMError, match="failed after 1 try: 500"):
        run(call, LLMConfig(model="m", max_retries=0))


def test_lets_unclassified_exceptions_through():
    def broken():
        raise KeyError("a bug, not the endpoint")

    with pytest.raises(KeyError):
        run(broken)


def test_reads_retry_after_in_seconds_milliseconds_or_as_a_date():
    assert retry_after_s({"Retry-After": "3"}) == 3.0
    assert retry_after_s({"retry-after-ms": "250"}) == 0.25
    now = 1_700_000_000.0
    assert retry_after_s({"Retry-After": email.utils.formatdate(now + 20, usegmt=True)}, now=now) == 20.0
    assert retry_after_s({"Retry-After": "soon"}) is None
    assert retry_after_s({}) is None and retry_after_s(None) is None


def test_status_failure_names_the_status_and_keeps_the_servers_message_on_one_line():
    failure = status_failure(429, {"Retry-After": "2"}, "slow\ndown")
    assert failure == Failure("429 Too Many Requests: slow down", retryable=True, retry_after_s=2.0)
    assert status_failure(599).what == "599"


def test_one_line_blanks_secrets_and_truncates():
    assert one_line("key sk-123 was\nwrong", ("sk-123",)) == "key *** was wrong"
    assert len(one_line("x" * 1000)) == 200
