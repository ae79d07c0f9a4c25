"""``load_inline`` as torch has it, built the way every native build is: confined, cached, checked.

KernelBench's candidates (and the models that learned from them) write a kernel as
``torch.utils.cpp_extension.load_inline(name, cpp_sources, functions=[...])``. This takes the
same call, writes the same ``main.cpp`` torch would (``#include <torch/extension.h>``, the
sources, a ``PYBIND11_MODULE`` for ``functions``), and hands it to the builder in place: in a
guard worker that is the trusted parent, which compiles it as the sandbox's build user under
the compiler's isolation and caches it by everything that changes the binary. The candidate's
``extra_cflags``/``extra_ldflags`` pass the same allow-list as ``native.load``'s flags; options
that name files or directories (``extra_include_paths``, ``build_directory``, sources as
files) are refused, as are CUDA sources, which kernelkiln does not build as torch extensions yet.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import threading
import types
from collections.abc import Mapping, Sequence
from typing import Any

from .flags import FlagError, check_flags
from .loader import BuildError, build_request, load_failure
from .records import BuildRequest, BuildResult

__all__ = ["InlineError", "inline_source", "load_inline"]

_lock = threading.Lock()
_modules: dict[str, types.ModuleType] = {}  # by library path: an extension initialises once per process


class InlineError(ValueError):
    """A ``load_inline`` call kernelkiln will not build; ``str()`` is one line."""


def _texts(value: str | Sequence[str] | None, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise InlineError(f"load_inline: {what} must be a string or a list of strings")


def _functions(value: str | Sequence[str] | Mapping[str, str] | None) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, str):
        value = [value]
    if isinstance(value, Mapping):
        named = dict(value)
    elif isinstance(value, (list, tuple)):
        named = {f: f for f in value}
    else:
        raise InlineError(f"load_inline: functions must be a list or dict, got {type(value).__name__}")
    for name, doc in named.items():
        if not (isinstance(name, str) and name.isidentifier() and name.isascii()):
            raise InlineError(f"load_inline: function name {name!r} is not a C++ identifier")
        if not isinstance(doc, str) or '"' in doc or "\\" in doc or "\n" in doc:
            raise InlineError(f"load_inline: the docstring of {name} must be one line without quotes or backslashes")
    return named


def _flags(value: str | Sequence[str] | None, what: str) -> list[str]:
    # KernelBench's examples pass [""]: torch drops empty flags on its command line, and so do we.
    flags = [f.strip() for f in _texts(value, what) if f.strip()]
    try:
        check_flags(flags, "c++")
    except FlagError as error:
        raise InlineError(f"load_inline: {what}: {error}") from None
    return flags


def inline_source(
    cpp_sources: str | Sequence[str],
    functions: str | Sequence[str] | Mapping[str, str] | None = None,
    *,
    with_pytorch_error_handling: bool = True,
    no_implicit_headers: bool = False,
) -> str:
    """The ``main.cpp`` torch's ``load_inline`` writes for these arguments."""
    sources = _texts(cpp_sources, "cpp_sources")
    if not no_implicit_headers:
        sources.insert(0, "#include <torch/extension.h>")
    named = _functions(functions)
    if named:
        sources.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        for name, doc in named.items():
            bound = f"torch::wrap_pybind_function({name})" if with_pytorch_error_handling else name
            sources.append(f'm.def("{name}", {bound}, "{doc}");')
        sources.append("}")
    return "\n".join(sources)


def load_inline(
    name: str,
    cpp_sources: str | Sequence[str],
    cuda_sources: str | Sequence[str] | None = None,
    functions: str | Sequence[str] | Mapping[str, str] | None = None,
    extra_cflags: str | Sequence[str] | None = None,
    extra_cuda_cflags: str | Sequence[str] | None = None,
    extra_ldflags: str | Sequence[str] | None = None,
    extra_include_paths: str | Sequence[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    with_cuda: bool | None = None,
    is_python_module: bool = True,
    with_pytorch_error_handling: bool = True,
    keep_intermediates: bool = True,
    use_pch: bool = False,
    no_implicit_headers: bool = False,
    **unsupported: Any,
) -> types.ModuleType:
    """Build a torch C++ extension from source strings and return it as a module, as torch's ``load_inline`` does.

    ``verbose``, ``keep_intermediates`` and ``use_pch`` are accepted and change nothing (the
    build log is in the build result; the cache makes a second build free). Raises
    ``InlineError`` for a call outside what is built, ``BuildError`` when it does not compile.
    """
    if unsupported:
        raise InlineError(f"load_inline: {', '.join(sorted(unsupported))} not supported")
    if not (isinstance(name, str) and name.isidentifier() and name.isascii()):
        raise InlineError(f"load_inline: name {name!r} is not a Python identifier")
    if _texts(cuda_sources, "cuda_sources") or with_cuda or _texts(extra_cuda_cflags, "extra_cuda_cflags"):
        raise InlineError(
            "load_inline: CUDA sources are not built by kernelkiln yet; write the CUDA kernel with "
            "native.load(SOURCE, {...}, lang='cuda') or Triton"
        )
    if _texts(extra_include_paths, "extra_include_paths") or build_directory is not None:
        raise InlineError("load_inline: extra_include_paths and build_directory name files, which candidates may not")
    if not is_python_module:
        raise InlineError("load_inline: only is_python_module=True is built (the extension is returned as a module)")
    flags = _flags(extra_cflags, "extra_cflags") + _flags(extra_ldflags, "extra_ldflags")
    source = inline_source(
        cpp_sources,
        functions,
        with_pytorch_error_handling=with_pytorch_error_handling,
        no_implicit_headers=no_implicit_headers,
    )
    request = BuildRequest(source=source, lang="c++", flags=tuple(flags), module=name)
    result = build_request(request)
    return _import(name, str(result.path), result, request)


def _import(name: str, path: str, result: BuildResult, request: BuildRequest) -> types.ModuleType:
    with _lock:
        module = _modules.get(path)
        if module is not None:
            return module
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        if spec is None:
            raise BuildError(result, request.filename)
        try:
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
        except ImportError as error:
            raise BuildError(load_failure(result, f"cannot import the extension: {error}"), request.filename) from None
        _modules[path] = module
        return module
