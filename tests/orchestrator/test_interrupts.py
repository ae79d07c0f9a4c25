"""Ctrl-C during a store write is delivered when the write ends."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from kernelkiln.orchestrator.interrupts import interrupts_deferred


def test_a_sigint_inside_the_block_is_raised_when_the_block_ends():
    finished = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
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
