"""Compile C/C++ or CUDA kernel source into a cached shared library.

``build`` never raises for anything the request or the compiler did: a bad flag, a
compile error, a timeout, a crash of the compiler or a missing compiler all come back
as ``BuildResult(ok=False)`` with at least one error diagnostic. ``check_flags`` is
the one place that raises (``FlagError``) for callers that want to validate early.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import platformdirs

from .cache import lookup, prepare_cache_dir, publish
from .cuda import host_compiler, nvcc_argv
from .diagnostics import parse_diagnostics, render_log
from .extension import (
    EXTENSION_LIMITS,
    EXTENSION_TIMEOUT_S,
    extension_argv,
    extension_identity,
    extension_paths,
    extension_problem,
)
from .flags import FlagError, check_flags, default_flags, split_link_flags
from .records import BuildRequest, BuildResult, Diagnostic
from .runner import CUDA_LIMITS, DEFAULT_LIMITS, compiler_confinement, compiler_env, resolve_group, run_confined
from .toolchain import Compiler, CompilerNotFound, cpu_identity, find_compiler

__all__ = [
    "NATIVE_ABI",
    "BuildRequest",
    "BuildResult",
    "Diagnostic",
    "FlagError",
    "build",
    "cache_key",
    "check_flags",
    "compile_argv",
    "default_cache_dir",
]

# Bump when anything about how binaries are produced or called changes.
NATIVE_ABI = 1
LANGS = ("c", "c++", "cuda")
# Default wall-clock limit per build (seconds); nvcc runs several tools per source.
TIMEOUTS = {"c": 60.0, "c++": 60.0, "cuda": 300.0}
MAX_SOURCE_BYTES = 4 << 20
_OUTPUT = "kernel.so"


def default_cache_dir() -> Path:
    """``$KILN_CACHE_DIR`` if set, else the per-user cache dir + ``/native``."""
    env = os.environ.get("KILN_CACHE_DIR")
    if env:
        return Path(env)
    return Path(platformdirs.user_cache_dir("kernelkiln")) / "native"


def compile_argv(request: BuildRequest, compiler: Compiler) -> list[str]:
    """The full compiler command line for ``request`` (flags are not checked here)."""
    if request.module:
        return extension_argv(request, compiler, _OUTPUT)
    if request.lang == "cuda":
        return nvcc_argv(request, compiler, _OUTPUT)
    compile_flags, link_flags = split_link_flags(request.flags)
    argv = [compiler.path, *default_flags(request.lang), *compile_flags]
    if compiler.json_diagnostics:
        argv.append("-fdiagnostics-format=json")
    # libm always: -ffast-math vectorizes expf & co. into libmvec calls that libm.so pulls in.
    return [*argv, request.filename, "-o", _OUTPUT, *link_flags, "-lm"]


def cache_key(request: BuildRequest) -> str:
    """sha256 over everything that affects the binary; never raises."""
    try:
        compiler = find_compiler(request.lang)
        toolchain = [compiler.path, compiler.version, compile_argv(request, compiler)]
    except (CompilerNotFound, KeyError):
        toolchain = ["<no compiler>", list(request.flags)]
    fields = {
        "abi": NATIVE_ABI,
        "lang": request.lang,
        "source": request.source,
        "toolchain": toolchain,
        "cpu": cpu_identity(),
    }
    if request.lang == "cuda":
        # The argv above names the GPU architecture; nvcc compiles host code with g++.
        fields["host"] = host_compiler(toolchain[0])
    if request.module:
        fields["extension"] = extension_identity()
    payload = json.dumps(fields, sort_keys=True, ensure_ascii=True, default=repr)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def build(
    request: BuildRequest,
    *,
    cache_dir: Path | None = None,
    user: int | None = None,
    group: int | None = None,
    timeout: float | None = None,
    limits: Mapping[str, int | None] | None = None,
    required: Sequence[str] = (),
    network: bool = True,
    filesystem: bool = True,
) -> BuildResult:
    """Compile ``request`` (or reuse the cache) and return the result as data.

    The compiler always runs under the isolation layers this kernel allows (see
    ``runner``; ``network``/``filesystem`` False leave out the empty network namespace and
    the hidden home directories); ``required`` names layers that must hold, or the build
    fails saying which.
    ``user``/``group`` run the compiler as that uid/gid (the gid defaults to the
    user's primary group); the cache entry stays owned by the caller. ``limits``
    overrides ``runner.DEFAULT_LIMITS`` (``CUDA_LIMITS`` for nvcc; names: as, cpu,
    fsize, nproc). ``timeout`` defaults to ``TIMEOUTS[lang]``.
    """
    started = time.perf_counter()
    if timeout is None:
        timeout = EXTENSION_TIMEOUT_S if request.module else TIMEOUTS.get(request.lang, 60.0)
    key = cache_key(request)

    held: dict[str, bool] = {}  # the compiler's isolation, once it ran
    notes: dict[str, str] = {}

    def failed(message: str, log: str = "", diagnostics: tuple[Diagnostic, ...] = ()) -> BuildResult:
        diagnostics = diagnostics or (Diagnostic("error", message),)
        return BuildResult(
            ok=False,
            key=key,
            path=None,
            diagnostics=diagnostics,
            cached=False,
            seconds=time.perf_counter() - started,
            log=log or message,
            isolation=held,
            isolation_notes=notes,
        )

    problem = _request_problem(request)
    if problem is not None:
        return failed(problem)
    try:
        directory = prepare_cache_dir(cache_dir if cache_dir is not None else default_cache_dir())
    except OSError as error:
        return failed(f"cache dir unusable: {error}")
    hit = lookup(directory, key)
    if hit is not None:
        return _with_seconds(hit, time.perf_counter() - started)
    try:
        compiler = find_compiler(request.lang)
    except CompilerNotFound as error:
        return failed(str(error))
    gid = resolve_group(user, group)
    try:
        workdir = tempfile.mkdtemp(prefix="kiln-build-")
    except OSError as error:
        return failed(f"could not create a build directory: {error}")
    try:
        try:
            _prepare_workdir(workdir, request, user, gid)
            base = EXTENSION_LIMITS if request.module else CUDA_LIMITS if request.lang == "cuda" else DEFAULT_LIMITS
            confinement = compiler_confinement(compiler.path, workdir, network=network, filesystem=filesystem)
            if request.module:  # torch's headers and libraries, wherever torch is installed
                confinement.read = sorted({*confinement.read, *extension_paths()})
            outcome = run_confined(
                compile_argv(request, compiler),
                cwd=workdir,
                env=compiler_env(compiler.path, workdir),
                user=user,
                group=gid,
                timeout=timeout,
                limits=limits,
                base_limits=base,
                confinement=confinement,
                required=required,
            )
        except OSError as error:
            return failed(f"could not start the compiler: {error}")
        if outcome.isolation is not None:
            held, notes = outcome.isolation.held, outcome.isolation.notes
        if outcome.refused:
            return failed(outcome.output.strip().splitlines()[-1] if outcome.output.strip() else "isolation refused")
        diagnostics, text_lines = parse_diagnostics(outcome.output, request.filename)
        log = render_log(diagnostics, text_lines, request.filename)
        if outcome.returncode != 0:
            exit_error = Diagnostic("error", _exit_message(outcome.returncode, timeout, text_lines))
            compiled_errors = any(d.severity == "error" for d in diagnostics)
            if not compiled_errors or outcome.returncode is None or outcome.returncode < 0:
                diagnostics += (exit_error,)
            return failed(exit_error.message, log or exit_error.message, diagnostics)
        try:
            owner = os.geteuid() if user is None else user
            path = publish(
                directory, key, os.path.join(workdir, _OUTPUT), owner=owner, diagnostics=diagnostics, log=log
            )
        except OSError as error:
            return failed(f"could not store the library: {error}", log)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return BuildResult(
        ok=True,
        key=key,
        path=path,
        diagnostics=diagnostics,
        cached=False,
        seconds=time.perf_counter() - started,
        log=log,
        isolation=held,
        isolation_notes=notes,
    )


def _prepare_workdir(workdir: str, request: BuildRequest, user: int | None, gid: int | None) -> None:
    # mkdtemp gives 0700; hand it to the compiler's identity, source readable to it.
    if user is not None or gid is not None:
        os.chown(workdir, -1 if user is None else user, -1 if gid is None else gid)
    source_path = os.path.join(workdir, request.filename)
    with open(source_path, "w", encoding="utf-8") as handle:
        handle.write(request.source)
    os.chmod(source_path, 0o644)


def _request_problem(request: BuildRequest) -> str | None:
    if request.lang not in LANGS:
        return f"unsupported lang {request.lang!r} (expected 'c', 'c++' or 'cuda')"
    if request.module and not (request.module.isidentifier() and request.module.isascii()):
        return f"extension name {request.module!r} is not a Python identifier"
    if request.module and request.lang != "c++":
        return "only C++ torch extensions are built (a CUDA one is not yet: use native.load with lang='cuda')"
    if request.module and (missing := extension_problem()) is not None:
        return f"cannot build a torch extension: {missing}"
    if not isinstance(request.source, str):
        return "source must be a string"
    try:
        size = len(request.source.encode("utf-8"))
    except UnicodeEncodeError:
        return "source is not valid UTF-8 text"
    if size > MAX_SOURCE_BYTES:
        return f"source larger than {MAX_SOURCE_BYTES} bytes"
    try:
        check_flags(request.flags, request.lang)
    except FlagError as error:
        return str(error)
    return None


def _exit_message(returncode: int | None, timeout: float, text_lines: list[str]) -> str:
    if returncode is None:
        return f"compiler timed out after {timeout:g} s"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"compiler killed by {name} (resource limit?)"
    lines = [t.strip() for t in text_lines if t.strip()]
    cause = next((t for t in lines if "error" in t.lower()), lines[-1] if lines else "")
    return f"compiler failed with exit code {returncode}" + (f": {cause}" if cause else "")


def _with_seconds(result: BuildResult, seconds: float) -> BuildResult:
    return dataclasses.replace(result, seconds=seconds)
