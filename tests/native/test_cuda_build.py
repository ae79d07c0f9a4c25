"""Tests for CUDA candidates' build path: nvcc command line, cache key, diagnostics, flags.

This machine may have nvcc but no GPU: everything here builds and binds but never
launches a kernel. Builds are few (each takes seconds) and share one cache dir.
"""

from __future__ import annotations

import importlib
import os
import shutil
import stat
import textwrap
from pathlib import Path

import pytest
import torch

from kernelkiln.native import (
    BuildError,
    BuildRequest,
    FlagError,
    build,
    cache_key,
    check_flags,
    load,
    set_builder,
    toolchain,
)
from kernelkiln.native.cuda import gpu_archs
from kernelkiln.native.diagnostics import parse_diagnostics
from kernelkiln.native.records import Diagnostic
from kernelkiln.native.runner import CUDA_LIMITS
from kernelkiln.native.signature import tensor_pointer

build_module = importlib.import_module("kernelkiln.native.build")

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
    reason="nvcc (CUDA toolkit) not installed on this machine",
)

ADD = textwrap.dedent("""\
    #include <cstdint>
    __global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
        int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
        if (i < n) out[i] = a[i] + b[i];
    }
    extern "C" int add(const float* a, const float* b, float* out, int64_t n) {
        int threads = 256;
        add_kernel<<<(unsigned)((n + threads - 1) / threads), threads>>>(a, b, out, n);
        return (int)cudaGetLastError();
    }
    """)
ADD_SIGNATURE = "int(const float*, const float*, float*, int64_t)"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cuda") / "cache"


@pytest.fixture(scope="module")
def built(cache: Path):
    result = build(BuildRequest(ADD, lang="cuda"), cache_dir=cache)
    assert result.ok, result.log
    return result


def test_vector_add_builds_a_shared_library(built, cache: Path) -> None:
    assert not built.cached and built.path == str(cache / f"{built.key}.so")
    assert os.path.isfile(built.path) and stat.S_IMODE(os.stat(built.path).st_mode) == 0o644
    assert not built.errors


def test_second_build_is_a_cache_hit(built, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_module, "run_confined", lambda *a, **k: pytest.fail("compiled again"))
    again = build(BuildRequest(ADD, lang="cuda"), cache_dir=cache)
    assert again.ok and again.cached and again.key == built.key and again.path == built.path


def test_key_covers_arch_flags_and_lang() -> None:
    base = cache_key(BuildRequest(ADD, lang="cuda"))
    sm80 = cache_key(BuildRequest(ADD, lang="cuda", flags=("-arch=sm_80",)))
    sm90 = cache_key(BuildRequest(ADD, lang="cuda", flags=("-arch=sm_90",)))
    gencode = cache_key(BuildRequest(ADD, lang="cuda", flags=("-gencode=arch=compute_90,code=sm_90",)))
    assert len({base, sm80, sm90, gencode}) == 4
    assert cache_key(BuildRequest(ADD, lang="cuda", flags=("--use_fast_math",))) != base
    assert cache_key(BuildRequest(ADD, lang="c++")) != base
    assert cache_key(BuildRequest(ADD, lang="cuda")) == base


def test_default_arch_is_explicit_and_follows_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    nvcc = toolchain.find_compiler("cuda")
    monkeypatch.setenv("KILN_CUDA_ARCH", "9.0")
    argv = build_module.compile_argv(BuildRequest(ADD, lang="cuda"), nvcc)
    assert "-arch=sm_90" in argv
    on_h100 = cache_key(BuildRequest(ADD, lang="cuda"))
    monkeypatch.setenv("KILN_CUDA_ARCH", "sm_80")
    assert cache_key(BuildRequest(ADD, lang="cuda")) != on_h100
    monkeypatch.delenv("KILN_CUDA_ARCH")
    # No GPU named: nvcc's own default, still spelled out on the command line.
    argv = build_module.compile_argv(BuildRequest(ADD, lang="cuda"), nvcc)
    assert any(a.startswith(("-arch=sm_", "-gencode=")) for a in argv)
    # A candidate's own arch replaces the default instead of adding to it.
    argv = build_module.compile_argv(BuildRequest(ADD, lang="cuda", flags=("-arch=sm_80",)), nvcc)
    assert [a for a in argv if a.startswith("-arch=")] == ["-arch=sm_80"]


def test_gpu_archs_parse_capabilities() -> None:
    assert gpu_archs("9.0") == ("sm_90",)
    assert gpu_archs("8.0,9.0,8.0") == ("sm_80", "sm_90")
    assert gpu_archs("sm_90a") == ("sm_90a",)
    assert gpu_archs("12.0") == ("sm_120",)
    assert gpu_archs("garbage") == ()


def test_device_syntax_error_gives_line(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}
    real = build_module.run_confined

    def spy(argv, **kwargs):
        seen.update(kwargs)
        return real(argv, **kwargs)

    monkeypatch.setattr(build_module, "run_confined", spy)
    source = ADD.replace("out[i] = a[i] + b[i];", "out[i] = a[i] + undefined_x;")
    result = build(BuildRequest(source, lang="cuda"), cache_dir=cache)
    assert not result.ok and result.path is None
    error = result.errors[0]
    assert error.line == 4 and 'identifier "undefined_x" is undefined' in error.message
    assert "kernel.cu:4: error:" in result.log
    # nvcc gets the CUDA limits and timeout, not gcc's.
    assert seen["base_limits"] == CUDA_LIMITS and seen["timeout"] == build_module.TIMEOUTS["cuda"]


def test_host_compiler_error_gives_line_and_column(cache: Path) -> None:
    source = ADD.replace('extern "C"', '#pragma GCC error "host side boom"\nextern "C"')
    result = build(BuildRequest(source, lang="cuda"), cache_dir=cache)
    assert not result.ok
    assert Diagnostic("error", "host side boom", 6, 19) in result.errors


def test_ptxas_error_is_an_error_without_candidate_line(cache: Path) -> None:
    source = ADD.replace("if (i < n)", 'asm volatile("bogus.instr;");\n    if (i < n)')
    result = build(BuildRequest(source, lang="cuda"), cache_dir=cache)
    assert not result.ok
    ptxas = [d for d in result.errors if d.message.startswith("ptxas:")]
    assert ptxas and all(d.line is None for d in ptxas)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to uid 65534 needs root")
def test_build_as_other_user_succeeds(cache: Path) -> None:
    result = build(BuildRequest("// built as nobody\n" + ADD, lang="cuda"), cache_dir=cache, user=65534)
    assert result.ok and not result.cached, result.log
    assert os.stat(result.path).st_uid == os.geteuid()


def test_loader_binds_launchers_and_rejects_cpu_tensors(built, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILN_CACHE_DIR", str(cache))
    set_builder(None)
    lib = load(ADD, {"add": ADD_SIGNATURE}, lang="cuda")  # cudart is static: loading needs no GPU driver
    assert lib.result.cached and lib.path == built.path
    x = torch.ones(4)
    with pytest.raises(TypeError, match="expected a CUDA tensor"):
        lib.add(x, x, x, 4)


def test_undeclared_launcher_is_a_one_line_error(built, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KILN_CACHE_DIR", str(cache))
    with pytest.raises(BuildError, match=r'not exported.*extern "C"') as caught:
        load(ADD, {"add_kernel": "void(const float*, const float*, float*, int64_t)"}, lang="cuda")
    assert "\n" not in str(caught.value)


def test_signature_check_requires_cuda_tensors_for_cuda() -> None:
    where = "add() argument 1 (const float*)"
    with pytest.raises(TypeError, match=r"expected a CUDA tensor.*got device cpu"):
        tensor_pointer(torch.ones(3), (torch.float32,), "cuda", where)
    with pytest.raises(TypeError, match="expected a CUDA tensor"):
        tensor_pointer(torch.empty(3, device="meta"), (torch.float32,), "cuda", where)
    with pytest.raises(TypeError, match="expected dtype float32"):
        tensor_pointer(torch.ones(3, dtype=torch.float64), (torch.float32,), "cuda", where)
    with pytest.raises(TypeError, match="expected a tensor"):
        tensor_pointer(3, (torch.float32,), "cuda", where)
    cpu = torch.ones(3)
    assert tensor_pointer(cpu, (torch.float32,), "cpu", where) == cpu.data_ptr()


@pytest.mark.parametrize(
    "flags",
    [
        ["-I/"],
        ["-I/usr/include"],
        ["-L/tmp"],
        ["-lcublas"],
        ["-lm"],
        ["-Xcompiler", "-fPIC"],
        ["-Xcompiler=-fplugin=x.so"],
        ["-Xlinker", "-rpath"],
        ["-Xlinker=-rpath=/tmp"],
        ["-ccbin", "gcc"],
        ["-ccbin=/tmp/evil"],
        ["--compiler-bindir=/tmp"],
        ["-o", "x.so"],
        ["-o/tmp/x"],
        ["@file"],
        ["--options-file", "x"],
        ["--options-file=x"],
        ["-include", "x.h"],
        ["--dryrun"],
        ["-arch=native"],
        ["-arch", "sm_90"],
        ["-arch=sm_90;id"],
        ["-gencode", "arch=compute_90,code=sm_90"],
        ["-Xptxas", "--ptxas-opts"],
        ["-Xptxas=-v,--output-file=/tmp/x"],
        ["-Xptxas"],
        ["-Xnvlink=x"],
        ["-DX=$(id)"],
        ["-std=c++14"],
        ["--keep"],
        ["--keep-dir=/tmp"],
        ["-odir=/tmp"],
        ["-fPIC"],
        ["--use-local-env"],
        ["-run"],
        ["-v"],
        [""],
        ["--maxrregcount=abc"],
        ["--ftz=maybe"],
    ],
)
def test_forbidden_nvcc_flags_are_flag_errors(flags: list[str], cache: Path) -> None:
    with pytest.raises(FlagError, match="not allowed") as caught:
        check_flags(flags, "cuda")
    assert "\n" not in str(caught.value)
    result = build(BuildRequest(ADD, lang="cuda", flags=tuple(flags)), cache_dir=cache)
    assert not result.ok and len(result.diagnostics) == 1
    assert "not allowed" in result.diagnostics[0].message


@pytest.mark.parametrize(
    "flags",
    [
        ["-O0"],
        ["-O2"],
        ["--use_fast_math"],
        ["-use_fast_math"],
        ["-lineinfo"],
        ["-arch=sm_90"],
        ["-arch=sm_90a"],
        ["-arch=compute_80"],
        ["--gpu-architecture=sm_100"],
        ["-gencode=arch=compute_90,code=sm_90"],
        ["-gencode=arch=compute_90,code=[sm_90,compute_90]"],
        ["--maxrregcount=64"],
        ["-Xptxas=-v"],
        ["-Xptxas", "-O3"],
        ["-Xptxas=-v,-O2,--maxrregcount=32"],
        ["-DTILE=64"],
        ["-UNDEBUG"],
        ["--ftz=true"],
        ["--prec-div=false"],
        ["--prec-sqrt=true"],
        ["--fmad=false"],
        ["-std=c++20"],
        ["--expt-relaxed-constexpr"],
        ["--extended-lambda"],
    ],
)
def test_allowed_nvcc_flags_pass(flags: list[str]) -> None:
    check_flags(flags, "cuda")


def test_c_flags_are_not_nvcc_flags() -> None:
    check_flags(["-march=native", "-lm"], "c")
    with pytest.raises(FlagError):
        check_flags(["-march=native"], "cuda")


def test_missing_nvcc_is_a_one_line_error(cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KILN_NVCC", str(tmp_path / "no-nvcc"))
    result = build(BuildRequest("// missing\n" + ADD, lang="cuda"), cache_dir=cache)
    assert not result.ok and len(result.diagnostics) == 1
    message = result.diagnostics[0].message
    assert "no cuda compiler found" in message and "\n" not in message
    # The plain lookup (PATH, then the toolkit's directory) fails the same way.
    monkeypatch.delenv("KILN_NVCC")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(toolchain._CANDIDATES, "cuda", ("nvcc", str(tmp_path / "cuda/bin/nvcc")))
    toolchain._probe.cache_clear()
    try:
        with pytest.raises(toolchain.CompilerNotFound, match="no cuda compiler found"):
            toolchain.find_compiler("cuda")
        monkeypatch.setenv("KILN_CACHE_DIR", str(cache))
        with pytest.raises(BuildError, match="no cuda compiler found") as caught:
            load("// missing too\n" + ADD, {"add": ADD_SIGNATURE}, lang="cuda")
        assert "\n" not in str(caught.value)
    finally:
        toolchain._probe.cache_clear()


def test_nvcc_output_parses_into_diagnostics() -> None:
    output = textwrap.dedent("""\
        kernel.cu:8:2: warning: #warning careful [-Wcpp]
            8 | #warning careful
              |  ^~~~~~~
        kernel.cu(3): warning #177-D: variable "unused" was declared but never referenced
              int unused = 3;
                  ^

        Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"

        kernel.cu(12): error: identifier "x" is undefined
        /usr/local/cuda/include/cuda_fp16.h(40): error: something in a header
        kernel.cu(3): warning #177-D: variable "unused" was declared but never referenced
        ptxas /tmp/kiln-build-1/tmpxft_0001-6_kernel.ptx, line 33; error   : Unknown modifier '.instr'
        ptxas fatal   : Ptx assembly aborted due to errors
        ptxas info    : Used 8 registers, used 0 barriers, 384 bytes cmem[0]
        ptxas info    : Compile time = 4.651 ms
        nvcc fatal   : Value 'sm_1' is not defined for option 'gpu-architecture'
        1 error detected in the compilation of "kernel.cu".
        """)
    diagnostics, _ = parse_diagnostics(output, "kernel.cu")
    assert diagnostics == (
        Diagnostic("warning", "#warning careful [-Wcpp]", 8, 2),
        Diagnostic("warning", 'variable "unused" was declared but never referenced [#177-D]', 3),
        Diagnostic("error", 'identifier "x" is undefined', 12),
        Diagnostic("error", "/usr/local/cuda/include/cuda_fp16.h:40: something in a header"),
        Diagnostic("error", "ptxas: Unknown modifier '.instr' (PTX line 33)"),
        Diagnostic("error", "ptxas: Ptx assembly aborted due to errors"),
        Diagnostic("note", "ptxas: Used 8 registers, used 0 barriers, 384 bytes cmem[0]"),
        Diagnostic("error", "nvcc: Value 'sm_1' is not defined for option 'gpu-architecture'"),
    )
