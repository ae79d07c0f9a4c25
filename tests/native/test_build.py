"""Tests for kernelkiln.native.build: compiling, diagnostics, cache, confinement."""

from __future__ import annotations

import importlib
import multiprocessing
import os
import shutil
import stat
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

from kernelkiln.native import (
    BuildRequest,
    BuildResult,
    Diagnostic,
    FlagError,
    build,
    cache_key,
    check_flags,
    default_cache_dir,
)
from kernelkiln.native.diagnostics import parse_diagnostics
from kernelkiln.native.runner import compiler_env, run_confined

# The package re-exports the build() function under the module's name.
build_module = importlib.import_module("kernelkiln.native.build")

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None and shutil.which("cc") is None, reason="no C compiler on this machine"
)

ADD = textwrap.dedent("""\
    #include <stdint.h>
    void add(const float* a, const float* b, float* out, int64_t n) {
        for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    }
    """)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def test_build_produces_library_then_cache_hit(cache: Path) -> None:
    first = build(BuildRequest(ADD), cache_dir=cache)
    assert first.ok and not first.cached, first.log
    assert first.path == str(cache / f"{first.key}.so")
    second = build(BuildRequest(ADD), cache_dir=cache)
    assert second.ok and second.cached
    assert second.key == first.key and second.path == first.path


def test_cache_entries_are_owner_only_writable(cache: Path) -> None:
    result = build(BuildRequest(ADD), cache_dir=cache)
    assert stat.S_IMODE(os.stat(result.path).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o755
    assert os.stat(result.path).st_uid == os.geteuid()
    assert not [p for p in os.listdir(cache) if p.endswith(".tmp")]


def test_key_changes_with_source_flags_and_lang() -> None:
    base = cache_key(BuildRequest(ADD))
    assert cache_key(BuildRequest(ADD)) == base
    assert cache_key(BuildRequest(ADD + "\n")) != base
    assert cache_key(BuildRequest(ADD, flags=("-O2",))) != base
    assert cache_key(BuildRequest(ADD, flags=("-DN=4",))) != cache_key(BuildRequest(ADD, flags=("-DN=8",)))
    assert cache_key(BuildRequest(ADD, lang="c++")) != base
    assert len(base) == 64


def test_compile_error_is_structured_with_source_line(cache: Path) -> None:
    source = "#include <stdint.h>\n\nint f(int a) {\n    int b = a;\n    return b + undefined_name;\n}\n"
    result = build(BuildRequest(source), cache_dir=cache)
    assert not result.ok and result.path is None
    error = next(d for d in result.diagnostics if d.severity == "error")
    assert error.line == 5 and error.column is not None
    assert "undefined_name" in error.message
    assert "kernel.c:5:" in result.log
    assert not list(cache.glob("*.so"))


def test_warnings_are_kept_and_survive_a_cache_hit(cache: Path) -> None:
    source = "int f(void) {\n#warning careful\n  return 0;\n}\n"
    first = build(BuildRequest(source), cache_dir=cache)
    assert first.ok
    assert Diagnostic("warning", "#warning careful", 2, 2) in first.diagnostics
    second = build(BuildRequest(source), cache_dir=cache)
    assert second.cached and second.diagnostics == first.diagnostics


def test_cplusplus_builds(cache: Path) -> None:
    source = 'extern "C" int twice(int x) { auto y = x; return 2 * y; }\n'
    assert build(BuildRequest(source, lang="c++"), cache_dir=cache).ok


@pytest.mark.parametrize(
    "flag",
    [
        "-fplugin=x.so",
        "-fplugin-arg-x-y",
        "-wrapper",
        "-wrapper=gdb",
        "-o",
        "-o/tmp/x",
        "-I/",
        "-I",
        "-L/tmp",
        "@file",
        "@/etc/passwd",
        "-B/tmp",
        "-Bprefix",
        "-specs=x",
        "-include",
        "-include/etc/passwd",
        "-imacros",
        "-iquote/",
        "-isystem/",
        "-x",
        "-xc",
        "-save-temps",
        "-dumpbase",
        "-fdump-tree-all",
        "-Wl,-rpath,/tmp",
        "-Wa,--x",
        "-Wp,-MD,/tmp/x",
        "-lfoo",
        "-l",
        "-DX=$(id)",
        "-DX=a b",
        "-fopt-info-vec=/tmp/x",
        "--param=max-unroll-times=abc",
        "--param",
        "-march=native;id",
        "-std=c11 -v",
        "",
        "-fprofile-generate",
        "-fdiagnostics-format=text",
        "-MD",
        "-MF/tmp/x",
        "--sysroot=/",
    ],
)
def test_forbidden_flags_rejected(flag: str, cache: Path) -> None:
    with pytest.raises(FlagError) as caught:
        check_flags([flag])
    assert "\n" not in str(caught.value)
    result = build(BuildRequest(ADD, flags=(flag,)), cache_dir=cache)
    assert not result.ok and len(result.diagnostics) == 1
    assert result.diagnostics[0].severity == "error"
    assert "not allowed" in result.diagnostics[0].message


@pytest.mark.parametrize(
    "flag",
    [
        "-O0",
        "-O2",
        "-O3",
        "-Os",
        "-Ofast",
        "-march=native",
        "-march=x86-64-v3",
        "-mtune=znver3",
        "-mavx2",
        "-mfma",
        "-mno-avx512f",
        "-funroll-loops",
        "-fno-unroll-loops",
        "-ffast-math",
        "-ftree-vectorize",
        "-fopenmp",
        "-fomit-frame-pointer",
        "-fno-strict-aliasing",
        "-fvect-cost-model=unlimited",
        "--param=max-unroll-times=8",
        "-DTILE=64",
        "-DUSE_X",
        "-std=c17",
        "-std=gnu++20",
        "-lm",
        "-lgomp",
        "-w",
        "-Wall",
        "-Wno-unused-variable",
    ],
)
def test_allowed_flags_pass(flag: str) -> None:
    check_flags([flag])


def test_user_flags_reach_the_compiler(cache: Path) -> None:
    source = "#if TILE != 64\n#error wrong tile\n#endif\nint f(void) { return TILE; }\n"
    assert build(BuildRequest(source, flags=("-DTILE=64",)), cache_dir=cache).ok
    failed = build(BuildRequest(source, flags=("-DTILE=32",)), cache_dir=cache)
    assert not failed.ok and failed.diagnostics[0].line == 2


def test_openmp_and_libm_link(cache: Path) -> None:
    source = textwrap.dedent("""\
        #include <math.h>
        #include <stdint.h>
        void f(float* x, int64_t n) {
            #pragma omp parallel for
            for (int64_t i = 0; i < n; ++i) x[i] = sqrtf(x[i]);
        }
        """)
    result = build(BuildRequest(source, flags=("-fopenmp", "-lm")), cache_dir=cache)
    assert result.ok, result.log


def test_failures_are_data_not_exceptions(cache: Path) -> None:
    assert not build(BuildRequest(ADD, lang="fortran"), cache_dir=cache).ok
    assert not build(BuildRequest("this is not C"), cache_dir=cache).ok
    assert not build(BuildRequest("int x;", flags=(3,)), cache_dir=cache).ok
    assert not build(BuildRequest("int x; \udc80"), cache_dir=cache).ok
    assert not build(BuildRequest("int x;"), cache_dir=Path("/proc/no/such/dir")).ok


def test_timeout_reports_a_cause(cache: Path) -> None:
    result = build(BuildRequest(ADD), cache_dir=cache, timeout=0.001)
    assert not result.ok and "timed out" in result.diagnostics[-1].message


def test_resource_limits_apply(cache: Path) -> None:
    result = build(BuildRequest(ADD), cache_dir=cache, limits={"as": 8 << 20})
    assert not result.ok and result.diagnostics[-1].severity == "error"


def test_compiler_env_excludes_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILN_FAKE_SECRET", "hunter2")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    env = compiler_env("/usr/bin/gcc", "/tmp/work")
    assert set(env) == {"PATH", "LANG", "TMPDIR"}
    assert "hunter2" not in repr(env) and "sk-fake" not in repr(env)


def test_build_passes_only_the_scrubbed_env(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILN_FAKE_SECRET", "hunter2")
    seen = []
    real = build_module.run_confined

    def spy(argv, **kwargs):
        seen.append(kwargs["env"])
        return real(argv, **kwargs)

    monkeypatch.setattr(build_module, "run_confined", spy)
    assert build(BuildRequest(ADD), cache_dir=cache).ok
    assert seen and all("KILN_FAKE_SECRET" not in env for env in seen)


def test_confined_process_does_not_see_parent_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KILN_FAKE_SECRET", "hunter2")
    env = compiler_env("/usr/bin/env", str(tmp_path))
    outcome = run_confined(["/usr/bin/env"], cwd=str(tmp_path), env=env, user=None, group=None, timeout=30, limits=None)
    assert outcome.returncode == 0 and "PATH=" in outcome.output
    assert "hunter2" not in outcome.output


def _race(cache: Path, barrier, queue) -> None:
    barrier.wait(timeout=60)
    queue.put(build(BuildRequest(ADD), cache_dir=cache).to_dict())


def test_concurrent_processes_building_one_key_both_succeed(cache: Path) -> None:
    # fork: the children start with everything imported, then build at one moment.
    context = multiprocessing.get_context("fork")
    barrier, queue = context.Barrier(3), context.Queue()
    procs = [context.Process(target=_race, args=(cache, barrier, queue)) for _ in range(3)]
    for proc in procs:
        proc.start()
    results = [BuildResult.from_dict(queue.get(timeout=120)) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    assert all(r.ok for r in results), [r.log for r in results]
    assert len({r.key for r in results}) == 1 and len({r.path for r in results}) == 1
    assert os.path.isfile(results[0].path)
    assert not [p for p in os.listdir(cache) if p.endswith(".tmp")]


@pytest.fixture
def shared_cache():
    # Under /tmp with 0755 parents, so another uid can reach (but not write) it.
    base = tempfile.mkdtemp(prefix="kiln-test-")
    os.chmod(base, 0o755)
    yield Path(base) / "native"
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to uid 65534 needs root")
def test_build_as_other_user_gives_cache_it_cannot_write(shared_cache: Path) -> None:
    result = build(BuildRequest(ADD), cache_dir=shared_cache, user=65534)
    assert result.ok and not result.cached, result.log
    info = os.stat(result.path)
    assert info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) == 0o644
    probe = (
        'cat "$1" >/dev/null || exit 10; '
        '( : >>"$1" ) 2>/dev/null && exit 11; '
        '( : >"$2/poison.so" ) 2>/dev/null && exit 12; exit 0'
    )
    done = subprocess.run(
        ["/bin/sh", "-c", probe, "sh", result.path, str(shared_cache)],
        check=False,
        user=65534,
        group=65534,
        extra_groups=[],
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, {
        10: "cannot read",
        11: "could append to the library",
        12: "could create a file in the cache",
    }[done.returncode]


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to uid 65534 needs root")
def test_compiler_as_other_user_cannot_include_private_files(shared_cache: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.h"
    secret.write_text("#error leaked\n")
    os.chmod(secret, 0o600)
    result = build(
        BuildRequest(f'#include "{secret}"\nint f(void) {{ return 0; }}\n'), cache_dir=shared_cache, user=65534
    )
    assert not result.ok and "leaked" not in result.log


def test_default_cache_dir_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path
    monkeypatch.delenv("KILN_CACHE_DIR")
    assert default_cache_dir().name == "native"


def test_records_round_trip_and_ignore_unknown_keys() -> None:
    diag = Diagnostic("error", "boom", 3, 4)
    assert Diagnostic.from_dict({**diag.to_dict(), "future": 1}) == diag
    request = BuildRequest("int x;", "c++", ("-O2",))
    assert BuildRequest.from_dict({**request.to_dict(), "extra": True}) == request
    result = BuildResult(True, "k", "/p.so", (diag,), True, 0.5, "log")
    assert BuildResult.from_dict({**result.to_dict(), "new": None}) == result
    assert BuildRequest("x", flags=["-O2"]).flags == ("-O2",)


def test_parse_text_fallback_and_foreign_files() -> None:
    output = (
        "kernel.c:7:3: error: expected ';' before '}' token\n"
        "/usr/include/x.h:2:1: warning: something\n"
        "cc1: error: unrecognized thing\n"
    )
    diagnostics, _ = parse_diagnostics(output, "kernel.c")
    assert diagnostics[0] == Diagnostic("error", "expected ';' before '}' token", 7, 3)
    assert diagnostics[1].line is None and "/usr/include/x.h:2" in diagnostics[1].message
    assert diagnostics[2].severity == "error" and diagnostics[2].line is None
