"""Each timed batch runs at a fresh offset of the C stack, so no worker is fast or slow by where its stack lies.

A vectorized kernel spills to its stack, and a stack slot that shares its offset within a 4 KiB page with the
data being loaded or stored stalls on a false dependence (4K aliasing). Where the stack lies within its page is
set once per process (ASLR), so identical code in twin processes read up to 2.6x apart, each process at its
speed for life: the "worker at a speed of its own" that replication kept catching. Measured on 2026-12-06 with a
tuned C softmax (-O3 -march=native -ffast-math, AVX-512), pairs of twin processes timed in alternation: 4 of 20
pairs beyond 5% with ASLR; 0 of 20 without; 3 of 20 without ASLR but with the stack shifted once per process;
0 of 40 with ASLR and the stack shifted afresh for every batch. Shifting it each batch (Stabilizer's
re-randomization: Curtsinger and Berger, ASPLOS 2013; the bias itself: Mytkowicz et al., ASPLOS 2009) turns the
luck into per-round noise that the median over rounds takes out, for the reference and the candidate alike.
"""

from __future__ import annotations

import ctypes
import functools
import os
import random
from collections.abc import Callable

from kernelkiln import native

SHIM = r"""
#include <alloca.h>
#include <stddef.h>

typedef void (*kiln_batch)(void);

void kiln_shifted(size_t pad, kiln_batch batch) {
    volatile char* room = alloca(pad + 1);
    room[0] = 0;
    batch();
    room[pad] = 0; /* the room stays allocated until the batch returns */
}
"""
_BATCH = ctypes.CFUNCTYPE(None)


@functools.cache
def shim_library() -> tuple[str | None, str]:
    """The guard's side: the shim built once per process (cached across processes), and why not where it failed.
    Built by the trusted parent like any kernel, never by a worker, and never counted among a candidate's builds."""
    result = native.build(native.BuildRequest(source=SHIM, lang="c", flags=("-O2",)))
    if not result.ok or result.path is None:
        first = result.errors[0].message if result.errors else "no library"
        return None, f"the stack shim did not build: {first}"
    return str(result.path), ""


def shim_fields(share: Callable[[str], str]) -> dict[str, str | None]:
    """The build request's fields that hand a worker the shim (``share``: a copy where the worker can read it)."""
    path, why_not = shim_library()
    return {"stack_shim": share(path) if path else None, "stack_shim_why_not": why_not}


class StackShifter:
    """Runs a batch below a random amount of stack (0 to a page, 16-byte steps), drawn afresh each call."""

    def __init__(self) -> None:
        self._rng = random.Random(os.urandom(16))  # its own generator: candidate code may seed the global one
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._shifted: Callable[[int, object], None] | None = None
        self.how = ""  # one line: how batches run, for the timing setup ("": not loaded)

    def load(self, path: str | None, why_not: str) -> None:
        """Open the shim the guard built (``path``; None: ``why_not`` says why there is none)."""
        if path is None:
            self.how = f"stack not shifted: {why_not}"
            return
        try:
            function = ctypes.CDLL(path, mode=os.RTLD_LOCAL).kiln_shifted
        except (OSError, AttributeError) as exc:
            self.how = f"stack not shifted: the shim did not load ({exc})"
            return
        function.argtypes = [ctypes.c_size_t, _BATCH]
        function.restype = None
        self._shifted = function
        self.how = f"stack shifted by 0-{self._page - 16} bytes, afresh each batch"

    def run(self, batch: Callable[[], None]) -> None:
        """Call ``batch`` below a fresh random offset; its exception, if any, is raised here."""
        if self._shifted is None:
            batch()
            return
        raised: list[BaseException] = []

        def call() -> None:
            try:
                batch()
            except BaseException as exc:  # ctypes would print and drop it
                raised.append(exc)

        self._shifted(self._rng.randrange(0, self._page, 16), _BATCH(call))
        if raised:
            raise raised[0]
