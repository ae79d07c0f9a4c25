"""The torch functions a forward calls, recorded under a torch function mode.

The one recorder of calls: the task infers its op family from its reference's calls
(kernelkiln.task.reference_calls); the guard forbids the reference's compute ops to a
candidate and records what a candidate calls (kernelkiln.guard.reference_ops, which names
them in its own normalized spelling). Only calls made at the top level are recorded: torch
turns the mode off while a recorded function runs, so what it calls inside is not seen.
torch is imported on first use, not here: loading a task should not wait for it.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import TracebackType

    import torch


def call_name(func: object) -> str:
    """The name of a torch function, ATen op or property (a property is named by its descriptor)."""
    name = getattr(func, "__name__", None) or repr(func)
    if name == "__get__":  # a property such as Tensor.shape or Tensor.T
        name = getattr(getattr(func, "__self__", None), "__name__", None) or name
    return name


@functools.cache
def _mode() -> type:
    from torch.overrides import TorchFunctionMode

    class Counting(TorchFunctionMode):
        def __init__(self, calls: Counter[str]) -> None:
            super().__init__()
            self.calls = calls

        def __torch_function__(
            self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
        ) -> Any:
            self.calls[call_name(func)] += 1
            return func(*args, **(kwargs or {}))

    return Counting


class CallRecorder:
    """Counts, by ``call_name``, the torch functions called at the top level while active.

    ``calls`` holds one count per name (bounded by the names, not the calls, however many a
    forward makes), in the order of each name's first call.
    """

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._active: Any = None

    def __enter__(self) -> CallRecorder:
        self._active = _mode()(self.calls)
        self._active.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        active, self._active = self._active, None
        active.__exit__(kind, exc, trace)


def record_calls(module: torch.nn.Module, inputs: list[Any]) -> Counter[str]:
    """Run ``module`` once on ``inputs`` without autograd and count the torch functions it calls."""
    import torch

    recorder = CallRecorder()
    with torch.no_grad(), recorder:
        module(*inputs)
    return recorder.calls
