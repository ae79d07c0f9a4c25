"""Joining a cluster: Ray Client's flaky server start is retried; other failures are one line at once."""

import pytest

ray = pytest.importorskip("ray", reason="needs kernelkiln[ray] (the test extra installs it)")
from kernelkiln.errors import UserError  # noqa: E402
from kernelkiln.evaluation import ray_pool  # noqa: E402

ABORTED = (
    "Initialization failure from server:\nTraceback (most recent call last):\n"
    "RuntimeError: Starting Ray client server failed."
)


def _init_failing(monkeypatch, failures: list[Exception]) -> list[str]:
    calls: list[str] = []

    def init(address=None, **_):
        calls.append(address)
        if failures:
            raise failures.pop(0)

    monkeypatch.setattr(ray_pool.ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray_pool.ray, "init", init)
    monkeypatch.setattr(ray_pool.ray, "shutdown", lambda: None)
    return calls


def test_a_client_server_that_dies_at_start_is_asked_for_again(monkeypatch):
    calls = _init_failing(monkeypatch, [ConnectionAbortedError(ABORTED)])
    ray_pool.connect("ray://head:10001")
    assert calls == ["ray://head:10001"] * 2


def test_a_client_server_that_keeps_dying_is_one_line_naming_the_cause(monkeypatch):
    calls = _init_failing(monkeypatch, [ConnectionAbortedError(ABORTED)] * 5)
    with pytest.raises(UserError) as caught:
        ray_pool.connect("ray://head:10001")
    assert len(calls) == ray_pool._CLIENT_TRIES
    assert "\n" not in str(caught.value) and "Starting Ray client server failed" in str(caught.value)


def test_a_refused_address_is_not_retried(monkeypatch):
    calls = _init_failing(monkeypatch, [ConnectionError("could not reach the GCS at head:6379")])
    with pytest.raises(UserError, match="could not reach the GCS"):
        ray_pool.connect("head:6379")
    assert len(calls) == 1
