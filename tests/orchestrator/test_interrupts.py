"""Ctrl-C during a store write is delivered when the write ends."""

from __future__ import annotations

import signal
import threading

import pytest

from kernelkiln.orchestrator.interrupts import interrupts_deferred


@pytest.fixture(autouse=True)
def sigint_as_in_a_terminal():
    """SIGINT handled by Python's default handler and not blocked, whatever the launcher left: a shell starts a
    background job with SIGINT ignored, and then Python installs no handler at all."""
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    yield
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    signal.signal(signal.SIGINT, handler)


def test_a_sigint_inside_the_block_is_raised_when_the_block_ends():
    finished = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            # raise_signal delivers to this thread now; os.kill(getpid) lets the kernel pick any thread (torch's
            # OpenMP workers are there after other tests), whose handler may run only after the block ended
            signal.raise_signal(signal.SIGINT)
            finished.append("the write")
    assert finished == ["the write"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_a_sigint_the_block_ends_quietly_and_the_handler_is_restored():
    with interrupts_deferred():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_outside_the_main_thread_it_changes_nothing():
    seen = []

    def body() -> None:
        with interrupts_deferred():
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(5)
    assert seen == [signal.default_int_handler]
