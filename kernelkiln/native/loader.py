"""Build C/C++ or CUDA kernel source and call its functions on torch tensors via ctypes.

    lib = load(SOURCE, {"row_sum": "void(const float*, float*, int64_t, int64_t)"})
    lib.row_sum(x, out, rows, cols)

Functions must have C linkage; in C++ and CUDA sources declare them ``extern "C"``.
With ``lang="cuda"`` the declared functions are host launchers (``k<<<g, b>>>(...)``
on the default stream) and their pointer arguments must be CUDA tensors. Builds go
through a pluggable builder (``set_builder``) so a sandboxed worker can ask a trusted
parent to compile; by default ``build`` runs in this process.
"""

from __future__ import annotations

import ctypes
import numbers
import operator
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from .build import build
from .records import BuildRequest, BuildResult, Diagnostic
from .signature import (
    DEVICES,
    POINTER_DTYPES,
    SCALARS,
    Param,
    Signature,
    SignatureError,
    parse_signature,
    tensor_pointer,
)

__all__ = ["BuildError", "NativeFunction", "NativeLibrary", "load", "prebuilt", "set_builder"]

Builder = Callable[[BuildRequest], BuildResult]

_IDENT = re.compile(r"[A-Za-z_]\w*")
_lock = threading.Lock()
_builder: Builder | None = None
_built: dict[BuildRequest, BuildResult] = {}  # successful builds of the current builder
_handles: dict[str, ctypes.CDLL] = {}  # loaded libraries by path, never unloaded


class BuildError(Exception):
    """The kernel did not build or load; ``.result`` holds the full ``BuildResult``."""

    def __init__(self, result: BuildResult, filename: str = "kernel.c") -> None:
        self.result = result
        self.filename = filename
        first = result.errors[0] if result.errors else Diagnostic("error", "build failed")
        super().__init__(first.format(filename))


def set_builder(fn: Builder | None) -> None:
    """Route all later ``load`` builds through ``fn``; ``None`` restores local builds."""
    global _builder
    with _lock:
        _builder = fn
        _built.clear()


@contextmanager
def prebuilt(libraries: Mapping[BuildRequest, str]) -> Iterator[None]:
    """Within, ``load`` of a request in ``libraries`` opens that library instead of building it.

    For a saved model's own binaries, on the machine they were built for; any other
    request goes to the builder in place before.
    """
    if not libraries:  # nothing to serve: the builder in place stays, its memo kept
        yield
        return
    with _lock:
        previous = _builder

    def serve(request: BuildRequest) -> BuildResult:
        path = libraries.get(request)
        if path is None:
            return previous(request) if previous is not None else build(request)
        return BuildResult(ok=True, key=f"prebuilt:{path}", path=path, cached=True)

    set_builder(serve)
    try:
        yield
    finally:
        set_builder(previous)


def load(source: str, functions: Mapping[str, str], *, lang: str = "c", flags: Sequence[str] = ()) -> NativeLibrary:
    """Build ``source`` (cached) and bind ``functions`` (symbol -> C signature).

    Raises ``SignatureError`` for a bad signature and ``BuildError`` when the code
    does not compile, load, or export a declared symbol (C++: use ``extern "C"``).
    """
    signatures = {}
    for name, text in functions.items():
        if not isinstance(name, str) or not _IDENT.fullmatch(name):
            raise SignatureError(f"function name {name!r} is not a C identifier")
        signatures[name] = parse_signature(text)
    request = BuildRequest(source=source, lang=lang, flags=tuple(flags))
    result = build_request(request)
    try:
        handle = _open(str(result.path))  # build_request made sure there is one
    except OSError as error:
        raise BuildError(load_failure(result, f"cannot load library: {error}"), request.filename) from None
    bound = {}
    for name, signature in signatures.items():
        try:
            pointer = handle[name]
        except AttributeError:
            hint = ' (declare it extern "C")' if lang in ("c++", "cuda") else ""
            raise BuildError(load_failure(result, f"symbol {name!r} not exported{hint}"), request.filename) from None
        bound[name] = NativeFunction(name, signature, pointer, DEVICES.get(lang, "cpu"))
    return NativeLibrary(bound, result, request)


class NativeFunction:
    """A bound kernel function; call it with tensors and numbers in C order."""

    __slots__ = ("_converters", "_pointer", "name", "signature")

    def __init__(self, name: str, signature: Signature, pointer: Any, device: str = "cpu") -> None:
        pointer.argtypes = [p.ctype for p in signature.params]
        pointer.restype = signature.restype
        self.name = name
        self.signature = signature
        self._pointer = pointer
        self._converters = tuple(_converter(name, i, p, device) for i, p in enumerate(signature.params))

    def __call__(self, *args: Any) -> Any:
        if len(args) != len(self._converters):
            raise TypeError(
                f"{self.name}() takes {len(self._converters)} arguments ({self.signature.text}), got {len(args)}"
            )
        return self._pointer(*[convert(arg) for convert, arg in zip(self._converters, args, strict=False)])

    def __repr__(self) -> str:
        return f"<NativeFunction {self.name}: {self.signature.text}>"


class NativeLibrary:
    """Loaded kernel functions as attributes (``lib.fn``) or items (``lib["fn"]``).

    ``request``, ``result`` and ``path`` describe the build; a kernel function with one
    of those names is reachable as ``lib["path"]``.
    """

    def __init__(self, functions: dict[str, NativeFunction], result: BuildResult, request: BuildRequest) -> None:
        self._functions = functions
        self.result = result
        self.request = request

    @property
    def path(self) -> str:
        return str(self.result.path)

    def __getattr__(self, name: str) -> NativeFunction:
        functions: dict[str, NativeFunction] = self.__dict__.get("_functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(
            f"native library has no declared function {name!r} (declared: {', '.join(sorted(functions)) or 'none'})"
        )

    def __getitem__(self, name: str) -> NativeFunction:
        return self._functions[name]

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._functions))

    def __repr__(self) -> str:
        return f"<NativeLibrary {self.path} functions={sorted(self._functions)}>"


def build_request(request: BuildRequest) -> BuildResult:
    """Build ``request`` through the builder in place; raises ``BuildError`` unless a library came out."""
    result = _build(request)
    if not result.ok or result.path is None:
        raise BuildError(result, request.filename)
    return result


def _build(request: BuildRequest) -> BuildResult:
    with _lock:
        builder, known = _builder, _built.get(request)
    if known is not None:
        return known
    result = builder(request) if builder is not None else build(request)
    if result.ok:
        with _lock:
            if _builder is builder:
                _built[request] = result
    return result


def _open(path: str) -> ctypes.CDLL:
    with _lock:
        handle = _handles.get(path)
        if handle is None:
            handle = _handles[path] = ctypes.CDLL(path, mode=os.RTLD_LOCAL)
        return handle


def load_failure(result: BuildResult, message: str) -> BuildResult:
    return BuildResult(
        ok=False,
        key=result.key,
        path=result.path,
        diagnostics=(*result.diagnostics, Diagnostic("error", message)),
        cached=result.cached,
        seconds=result.seconds,
        log=f"{result.log}\n{message}".strip(),
    )


def _converter(function: str, index: int, param: Param, device: str) -> Callable[[Any], Any]:
    where = f"{function}() argument {index + 1} ({param.text})"
    if param.pointer:
        dtypes = POINTER_DTYPES[param.base]
        return lambda value: tensor_pointer(value, dtypes, device, where)
    _, kind, bounds = SCALARS[param.base]
    if kind == "float":

        def convert_float(value: Any) -> float:
            if isinstance(value, numbers.Real) and not isinstance(value, torch.Tensor):
                return float(value)
            raise TypeError(f"{where}: expected a real number, got {type(value).__name__}")

        return convert_float
    low, high = bounds  # type: ignore[misc]

    def convert_int(value: Any) -> int:
        try:
            number = operator.index(value)
        except TypeError:
            raise TypeError(f"{where}: expected an int, got {type(value).__name__}") from None
        if not low <= number <= high:
            raise TypeError(f"{where}: {number} out of range [{low}, {high}]")
        return number

    return convert_int
