"""The float64 oracle: the reference module run in double, to measure every error against.

A float32 reference is itself off the exact result by its own rounding error, and an
honest candidate that sums in another order is off by an error of the same kind, often
larger (a sequential loop against torch's cascade sum). Measured against the oracle, a
candidate may err by the task's tolerance, by ORACLE_FACTOR times the reference's own
error, or by ROUNDING_FACTOR times what rounding the inputs and parameters once more to
their own precision changes in the exact result, whichever is largest: honest float32
reordering passes at any reduction length measured, half precision does not
(benchmarks/oracle_factor.py; README "The guard").
"""

from __future__ import annotations

import copy
import functools
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# Both factors come from benchmarks/oracle_factor.py (README, "The guard", item 3): honest
# float32 kernels (row sums: sequential, blocked, 8 accumulators, AVX2, -ffast-math; matmuls:
# naive, FMA, k-blocked; torch itself on every core) against torch.sum, x @ ones and a matmul,
# reduction lengths 1024 to 65536. The reference's own error alone cannot tell them from half
# precision: a sequential sum needed up to 73x torch.sum's own error, half precision only 58x
# that of x @ ones (a less accurate reference; 16 outputs). Against what rounding the inputs
# once more changes, honest kernels needed at most 170x and half precision at least 4074x: 800
# sits 4.7x and 5.1x from them. 8 only admits what is as accurate as the reference itself (the
# reference on more threads, a TF32 reference), 7x below half precision against x @ ones.
ORACLE_FACTOR = 8.0
ROUNDING_FACTOR = 800.0

_lock = threading.Lock()
_oracles: weakref.WeakKeyDictionary[torch.nn.Module, Oracle] = weakref.WeakKeyDictionary()


def _first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    return text if len(text) <= 160 else text[:157] + "..."


def _to_double(x: Any) -> Any:
    """A float64 copy of a floating tensor (complex128 of a complex one); a copy of any other tensor."""
    if not isinstance(x, torch.Tensor):
        return x
    if x.is_floating_point():
        return x.to(torch.float64, copy=True)
    if x.is_complex():
        return x.to(torch.complex128, copy=True)
    return x.clone()


def _jitter(t: torch.Tensor, unit: float, generator: torch.Generator) -> torch.Tensor:
    """Relative noise uniform within ``unit`` (a float64 ``t`` rounded once more, as it were)."""
    return 1 + unit * (2 * torch.rand(t.shape, generator=generator, dtype=torch.float64) - 1)


def _unit(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps / 2


def _same(a: Any, b: Any) -> bool:
    """Bitwise the same outputs (NaN equal to NaN)."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return a is b or a == b
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool((a.eq(b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


def as_list(value: Any) -> list[Any]:
    """A module's outputs as a list (a lone tensor becomes one item)."""
    return list(value) if isinstance(value, (tuple, list)) else [value]


def floating(t: Any) -> bool:
    """Whether ``t`` is a floating or complex tensor."""
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def _mismatch(refs: list[Any], doubles: list[Any]) -> str | None:
    """Why the float64 run's outputs do not correspond to the float32 ones, or None."""
    if len(doubles) != len(refs):
        return f"the float64 run returns {len(doubles)} output(s), the reference {len(refs)}"
    for j, (r, d) in enumerate(zip(refs, doubles, strict=False)):
        if not floating(r):
            continue
        want = torch.complex128 if r.is_complex() else torch.float64
        if not isinstance(d, torch.Tensor) or d.dtype != want or d.shape != r.shape:
            got = f"{d.dtype} {tuple(d.shape)}" if isinstance(d, torch.Tensor) else type(d).__name__
            return f"the float64 run's output {j} is {got}, not {want} {tuple(r.shape)}"
    return None


def precise(t: torch.Tensor) -> torch.Tensor:
    """A floating tensor in float64, a complex one in complex128 (what errors are measured in)."""
    return t.double() if t.is_floating_point() else t.to(torch.complex128)


@dataclass(frozen=True)
class Spread:
    """How far one result lies from another, over the elements where both are finite."""

    largest: float  # max |difference|
    l2: float  # || difference ||_2


def _spread(a: torch.Tensor, b: torch.Tensor, usable: torch.Tensor | None) -> Spread:
    d = a - b if usable is None else (a - b)[usable]
    return Spread(float(d.abs().max()) if d.numel() else 0.0, float(torch.linalg.vector_norm(d)))


class Exact:
    """The oracle's result for one output, measured against the float32 reference's on demand.

    ``value`` is the oracle's output where it and the reference's are finite, the
    reference's elsewhere (its inf and NaN must be matched); ``own`` is the reference's
    error against the oracle and ``size`` the oracle's L2 norm, both over the elements
    where both are finite. ``rounding()`` is how far the oracle moves when its inputs and
    parameters are rounded once more: the error any computation at the reference's
    precision is entitled to, up to a factor. It costs a float64 run, shared by a trial's
    outputs (None when that run failed). Each is computed on first use: most outputs pass
    on the tolerance alone.
    """

    def __init__(self, ref: torch.Tensor, value: torch.Tensor, index: int, perturbed: Callable[[], list[Any] | None]):
        self._ref, self._oracle, self._index, self._perturbed = ref, value, index, perturbed
        self._rounding: list[Spread | None] = []

    @functools.cached_property
    def _usable(self) -> torch.Tensor | None:
        """Where both are finite; None when that is everywhere (no mask needed)."""
        usable = torch.isfinite(precise(self._ref)) & torch.isfinite(self._oracle)
        return None if bool(usable.all()) else usable

    @functools.cached_property
    def value(self) -> torch.Tensor:
        usable = self._usable
        return self._oracle if usable is None else torch.where(usable, self._oracle, precise(self._ref))

    @functools.cached_property
    def own(self) -> Spread:
        return _spread(precise(self._ref), self._oracle, self._usable)

    @functools.cached_property
    def size(self) -> float:
        usable = self._usable
        return float(torch.linalg.vector_norm(self._oracle if usable is None else self._oracle[usable]))

    def rounding(self) -> Spread | None:
        if not self._rounding:
            outs = self._perturbed()
            moved = outs[self._index] if outs is not None else None
            spread = None
            if isinstance(moved, torch.Tensor) and (moved.shape, moved.dtype) == (
                self._oracle.shape,
                self._oracle.dtype,
            ):
                usable = torch.isfinite(moved) if self._usable is None else self._usable & torch.isfinite(moved)
                spread = _spread(moved, self._oracle, None if bool(usable.all()) else usable)
            self._rounding.append(spread)
        return self._rounding[0]


def _once(fn: Callable[[], Any]) -> Callable[[], Any]:
    done: list[Any] = []

    def call() -> Any:
        if not done:
            done.append(fn())
        return done[0]

    return call


class Oracle:
    """The float64 copy of one float32 reference module, and whether it stands for the exact result.

    One per reference module (so per workload and session), decided on first use; the
    float32 module itself is passed in, never held, so the cache lets it be collected.
    """

    def __init__(self) -> None:
        self.double: torch.nn.Module | None = None
        self.units: list[float] = []  # unit roundoff of each floating parameter/buffer's own dtype
        self.note: str | None = None  # why the oracle does not apply (None: it does)
        self.decided = False

    def _state(self) -> list[torch.Tensor]:
        assert self.double is not None
        return [t for t in [*self.double.parameters(), *self.double.buffers()] if t.is_floating_point()]

    def _decide(self, model: torch.nn.Module, inputs: list[Any], refs: list[Any]) -> list[Any] | None:
        """Set ``note`` (or the double model) from a first trial; the oracle's outputs for it."""
        self.decided = True
        if not any(floating(r) for r in refs):
            self.note = "integer or bool outputs: compared exactly with the reference"
            return None
        outs = []
        for seed in (1, 2):  # a random reference (dropout, torch.rand) has no single exact result
            torch.manual_seed(seed)
            outs.append(as_list(model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])))
        if not all(_same(a, b) for a, b in zip(*outs, strict=False)):
            self.note = "the reference is random (two runs on the same inputs disagree)"
            return None
        try:
            double = copy.deepcopy(model)
            self.units = [_unit(t.dtype) for t in [*double.parameters(), *double.buffers()] if t.is_floating_point()]
            self.double = double.double()
        except Exception as exc:
            self.note = f"the reference module cannot be made float64: {_first_line(exc)}"
            return None
        return self._run(inputs, refs)

    def _run(self, inputs: list[Any], refs: list[Any]) -> list[Any] | None:
        assert self.double is not None  # set by the caller just before
        try:
            doubles = as_list(self.double(*[_to_double(x) for x in inputs]))
        except Exception as exc:
            self.note = f"the reference does not run in float64: {_first_line(exc)}"
            return None
        self.note = _mismatch(refs, doubles)
        return None if self.note else [d.detach() for d in doubles]

    def outputs(self, model: torch.nn.Module, inputs: list[Any], refs: list[Any]) -> list[torch.Tensor | None]:
        """Per reference output: the oracle's (None for integer outputs, or all None when it does not apply).

        Call with torch's global state held (``Task.bound``): it reseeds the global RNG.
        """
        doubles = (
            self._decide(model, inputs, refs) if not self.decided else (None if self.note else self._run(inputs, refs))
        )
        if doubles is None:
            return [None] * len(refs)
        return [d if floating(r) else None for r, d in zip(refs, doubles, strict=False)]

    def perturbed(self, inputs: list[Any]) -> list[Any] | None:
        """The oracle's outputs with every floating input and parameter rounded once more (None: it failed).

        Each value is moved by relative noise within its own dtype's unit roundoff, from a fixed
        seed; the parameters are restored afterwards. Call with ``Task.bound`` held.
        """
        if self.double is None or self.note:
            return None
        generator = torch.Generator().manual_seed(0)
        state = self._state()
        saved = [t.detach().clone() for t in state]
        try:
            with torch.no_grad():
                for t, unit in zip(state, self.units, strict=False):
                    t.mul_(_jitter(t, unit, generator))
                moved = [
                    _to_double(x) * _jitter(x, _unit(x.dtype), generator)
                    if isinstance(x, torch.Tensor) and x.is_floating_point()
                    else _to_double(x)
                    for x in inputs
                ]
                return [o.detach() if isinstance(o, torch.Tensor) else o for o in as_list(self.double(*moved))]
        except Exception:
            return None
        finally:
            with torch.no_grad():
                for t, s in zip(state, saved, strict=False):
                    t.copy_(s)


def exact_outputs(
    refs: list[torch.Tensor], values: list[torch.Tensor | None], perturbed: Callable[[], list[Any] | None]
) -> list[Exact | None]:
    """The oracle's ``values`` for the reference's outputs ``refs``, sharing one on-demand perturbed run."""
    shared = _once(perturbed)
    return [
        Exact(r, v, j, shared) if v is not None else None for j, (r, v) in enumerate(zip(refs, values, strict=False))
    ]


def oracle_for(model: torch.nn.Module) -> Oracle:
    """The oracle of a float32 reference module (made on first use, then kept as long as the module)."""
    with _lock:
        oracle = _oracles.get(model)
        if oracle is None:
            oracle = _oracles[model] = Oracle()
        return oracle
