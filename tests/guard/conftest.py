"""Shared guard fixtures."""

from __future__ import annotations

import pytest

from kernelkiln.guard import GuardSession
from kernelkiln.task import load_task
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.tasks import TASKS


@pytest.fixture(scope="module")
def softmax():
    """A fast guard session on the tiny softmax task, one per test module."""
    with GuardSession(load_task(TASKS / "tiny_softmax.py"), fast_config()) as guard:
        yield guard
