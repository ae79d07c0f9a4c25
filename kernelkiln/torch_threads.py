"""torch's intra-op thread count held at one for a block of the process's own torch work."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run the block's torch work on one thread, then restore the count.

    Idle OpenMP threads spin for a while after a parallel region: in a parent that times a worker
    next they would steal its core, and on a busy machine a multi-threaded forward is mostly waiting.
    """
    import torch  # here, not at the top: `kiln --help` should not wait for torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(saved)
