"""Each timed batch runs at a fresh offset of the C stack: where a process's stack lies is not its speed."""

from __future__ import annotations

import ctypes

import pytest

from kernelkiln import native
from kernelkiln.guard.worker.stack import StackShifter, shim_library

_HERE = "#include <stdint.h>\nuintptr_t here(void) { volatile char c = 0; return (uintptr_t)&c + c; }\n"


@pytest.fixture(scope="module")
def here():
    result = native.build(native.BuildRequest(source=_HERE, lang="c", flags=("-O2",)))
    function = ctypes.CDLL(str(result.path)).here
    function.restype = ctypes.c_size_t
    return function


def _offsets(shifter: StackShifter, here, calls: int = 40) -> set[int]:
    seen: set[int] = set()
    for _ in range(calls):
        shifter.run(lambda: seen.add(here() % 4096))
    return seen


def test_each_batch_runs_at_its_own_offset_within_a_page(here):
    shifter = StackShifter()
    shifter.load(*shim_library())
    assert shifter.how.startswith("stack shifted")
    assert len(_offsets(shifter, here)) >= 20  # 256 offsets to draw from


def test_without_the_shim_batches_run_where_the_stack_is_and_say_why(here):
    shifter = StackShifter()
    shifter.load(None, "the stack shim did not build: no compiler")
    assert shifter.how == "stack not shifted: the stack shim did not build: no compiler"
    assert len(_offsets(shifter, here)) == 1


def test_an_error_inside_a_shifted_batch_reaches_the_caller():
    shifter = StackShifter()
    shifter.load(*shim_library())

    def failing() -> None:
        raise ValueError("kernel failed")

    with pytest.raises(ValueError, match="kernel failed"):
        shifter.run(failing)
