"""Tests for kernelkiln.native.loader: building, binding and calling kernels."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
import torch

from kernelkiln.native import (
    BuildError,
    BuildRequest,
    BuildResult,
    Diagnostic,
    SignatureError,
    build,
    load,
    prebuilt,
    set_builder,
)
from kernelkiln.native.signature import MAX_PARAMS, parse_signature

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None and shutil.which("cc") is None, reason="no C compiler on this machine"
)

KERNELS = textwrap.dedent("""\
    #include <stddef.h>
    #include <stdint.h>
    void row_sum(const float* x, float* out, int64_t rows, int64_t cols) {
        for (int64_t r = 0; r < rows; ++r) {
            float s = 0.0f;
            for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c];
            out[r] = s;
        }
    }
    void add(const float* a, const float* b, float* out, int64_t n) {
        for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    }
    double dot(const double* a, const double* b, size_t n) {
        double s = 0.0;
        for (size_t i = 0; i < n; ++i) s += a[i] * b[i];
        return s;
    }
    int32_t scale_i32(int32_t* x, int n, int factor) {
        for (int i = 0; i < n; ++i) x[i] *= factor;
        return n;
    }
    void copy_u16(const uint16_t* src, uint16_t* dst, int64_t n) {
        for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
    }
    int64_t count_true(const uint8_t* mask, int64_t n) {
        int64_t k = 0;
        for (int64_t i = 0; i < n; ++i) k += mask[i] != 0;
        return k;
    }
    float axpy(float a, const float* x, float* y, long n) {
        for (long i = 0; i < n; ++i) y[i] += a * x[i];
        return a;
    }
    """)

SIGNATURES = {
    "row_sum": "void(const float*, float*, int64_t, int64_t)",
    "add": "void(const float* a, const float* b, float* out, int64_t n)",
    "dot": "double(const double*, const double*, size_t)",
    "scale_i32": "int32_t(int32_t*, int, int)",
    "copy_u16": "void(const uint16_t*, uint16_t*, int64_t)",
    "count_true": "int64_t(const uint8_t*, int64_t)",
    "axpy": "float(float, const float*, float*, long)",
}


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    set_builder(None)
    yield
    set_builder(None)


@pytest.fixture
def lib():
    return load(KERNELS, SIGNATURES)


def test_row_sum_and_add_match_torch(lib) -> None:
    torch.manual_seed(0)
    x = torch.randn(13, 37)
    out = torch.empty(13)
    assert lib.row_sum(x, out, 13, 37) is None
    torch.testing.assert_close(out, x.sum(dim=1))
    a, b, c = torch.randn(100), torch.randn(100), torch.empty(100)
    lib.add(a, b, c, a.numel())
    torch.testing.assert_close(c, a + b)


def test_return_values_and_scalar_types(lib) -> None:
    a, b = torch.randn(50, dtype=torch.float64), torch.randn(50, dtype=torch.float64)
    assert lib.dot(a, b, 50) == pytest.approx(float(a @ b))
    x = torch.arange(6, dtype=torch.int32)
    assert lib.scale_i32(x, 6, 3) == 6
    assert x.tolist() == [0, 3, 6, 9, 12, 15]
    y, xs = torch.zeros(4), torch.ones(4)
    assert lib.axpy(2.5, xs, y, 4) == 2.5
    assert lib["axpy"](1, xs, y, 4) == 1.0  # an int is a valid float argument
    torch.testing.assert_close(y, torch.full((4,), 3.5))


def test_half_storage_and_bool_masks(lib) -> None:
    for dtype in (torch.float16, torch.bfloat16):
        src = torch.randn(9).to(dtype)
        dst = torch.empty_like(src)
        lib.copy_u16(src, dst, 9)
        assert torch.equal(src, dst)
    mask = torch.tensor([True, False, True, True])
    assert lib.count_true(mask, 4) == 3
    assert lib.count_true(mask.to(torch.uint8), 4) == 3


def test_wrong_dtype_raises_type_error(lib) -> None:
    with pytest.raises(TypeError, match=r"argument 1 \(const float\*\).*float32.*float64"):
        lib.row_sum(torch.zeros(2, 2, dtype=torch.float64), torch.zeros(2), 2, 2)
    with pytest.raises(TypeError, match="int32"):
        lib.scale_i32(torch.zeros(3, dtype=torch.int64), 3, 1)


def test_non_contiguous_raises_type_error(lib) -> None:
    x = torch.randn(4, 6).t()
    with pytest.raises(TypeError, match="contiguous"):
        lib.row_sum(x, torch.empty(6), 6, 4)


def test_arity_and_scalar_mismatches_raise_type_error(lib) -> None:
    a = torch.zeros(3)
    with pytest.raises(TypeError, match=r"takes 4 arguments.*got 3"):
        lib.add(a, a, a)
    with pytest.raises(TypeError, match="expected a tensor"):
        lib.add(a, [0.0, 0.0, 0.0], a, 3)
    with pytest.raises(TypeError, match="expected an int"):
        lib.add(a, a, a, 3.0)
    with pytest.raises(TypeError, match="out of range"):
        lib.scale_i32(torch.zeros(1, dtype=torch.int32), 2**40, 1)
    with pytest.raises(TypeError, match="out of range"):
        lib.dot(torch.zeros(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64), -1)
    with pytest.raises(TypeError, match="real number"):
        lib.axpy("2", a, a, 3)


def test_unknown_function_attribute(lib) -> None:
    with pytest.raises(AttributeError, match="no declared function 'nope'"):
        lib.nope  # noqa: B018
    assert "row_sum" in dir(lib) and lib.result.ok and lib.path.endswith(".so")


def test_cplusplus_with_extern_c() -> None:
    source = textwrap.dedent("""\
        #include <cstdint>
        #include <algorithm>
        extern "C" void relu(const float* x, float* y, int64_t n) {
            std::transform(x, x + n, y, [](float v) { return std::max(v, 0.0f); });
        }
        """)
    lib = load(source, {"relu": "void(const float*, float*, int64_t)"}, lang="c++")
    x = torch.randn(64)
    y = torch.empty(64)
    lib.relu(x, y, 64)
    torch.testing.assert_close(y, torch.relu(x))


def test_cplusplus_without_extern_c_is_a_build_error() -> None:
    source = "int twice(int x) { return 2 * x; }\n"
    with pytest.raises(BuildError, match='extern "C"'):
        load(source, {"twice": "int(int)"}, lang="c++")


def test_compile_error_raises_build_error_with_one_line() -> None:
    source = "#include <stdint.h>\n\nvoid f(float* x) {\n    x[0] = y;\n}\n"
    with pytest.raises(BuildError) as caught:
        load(source, {"f": "void(float*)"})
    message = str(caught.value)
    assert message.startswith("kernel.c:4:12: error: ") and "\n" not in message
    assert not caught.value.result.ok
    assert caught.value.result.diagnostics[0].line == 4


def test_bad_flag_raises_build_error() -> None:
    with pytest.raises(BuildError, match="not allowed"):
        load(KERNELS, {"add": SIGNATURES["add"]}, flags=["-fplugin=evil.so"])


def test_flags_are_applied() -> None:
    source = "int tile(void) { return TILE; }\n"
    assert load(source, {"tile": "int()"}, flags=["-DTILE=32"]).tile() == 32
    assert load(source, {"tile": "int()"}, flags=["-DTILE=64", "-O1"]).tile() == 64


@pytest.mark.parametrize(
    "signature",
    [
        "void(half*)",
        "void(float**)",
        "char*(int)",
        "void(unsigned int)",
        "void",
        "void(float*, , int)",
        "vector<float>(int)",
        "void(float* a b)",
        42,
    ],
)
def test_bad_signatures_raise_signature_error(signature) -> None:
    with pytest.raises(SignatureError):
        load(KERNELS, {"add": signature})


def test_a_signature_over_ctypes_parameter_limit_is_refused_naming_it() -> None:
    parse_signature(f"void({', '.join(['float*'] * MAX_PARAMS)})")
    with pytest.raises(SignatureError, match=f"1025 parameters: ctypes calls at most {MAX_PARAMS}"):
        parse_signature(f"void({', '.join(['float*'] * (MAX_PARAMS + 1))})")


def test_bad_function_name_raises_signature_error() -> None:
    with pytest.raises(SignatureError):
        load(KERNELS, {"add; rm": "void()"})


def test_signature_parser_accepts_names_and_qualifiers() -> None:
    parsed = parse_signature("int64_t ( const float * __restrict__ x , size_t n )")
    assert parsed.returns == "int64_t"
    assert [(p.base, p.pointer) for p in parsed.params] == [("float", True), ("size_t", False)]
    assert parse_signature("void(void)").params == ()


def test_pluggable_builder_receives_requests() -> None:
    seen: list[BuildRequest] = []

    def forwarding(request: BuildRequest) -> BuildResult:
        seen.append(request)
        return build(request)

    set_builder(forwarding)
    lib = load(KERNELS, {"add": SIGNATURES["add"]}, flags=("-O2",))
    assert seen == [BuildRequest(KERNELS, "c", ("-O2",))]
    a = torch.ones(3)
    out = torch.empty(3)
    lib.add(a, a, out, 3)
    assert out.tolist() == [2.0, 2.0, 2.0]
    load(KERNELS, {"add": SIGNATURES["add"]}, flags=("-O2",))
    assert len(seen) == 1  # a successful build is remembered per builder


def test_builder_failure_becomes_build_error() -> None:
    failure = BuildResult(
        ok=False,
        key="k",
        path=None,
        diagnostics=(Diagnostic("warning", "meh", 1, 1), Diagnostic("error", "no good\nat all", 3, 7)),
        cached=False,
        seconds=0.0,
        log="",
    )
    set_builder(lambda request: failure)
    with pytest.raises(BuildError) as caught:
        load("int f(void) { return 0; }", {"f": "int()"})
    assert str(caught.value) == "kernel.c:3:7: error: no good at all"
    assert caught.value.result is failure


def test_prebuilt_serves_a_saved_library_without_building_and_restores_the_builder(tmp_path: Path) -> None:
    saved = tmp_path / "saved.so"
    shutil.copy(load(KERNELS, SIGNATURES).path, saved)
    other = "void one(float* x) { x[0] = 1.0f; }\n"
    asked: list[BuildRequest] = []

    def refusing(request: BuildRequest) -> BuildResult:
        asked.append(request)
        return BuildResult(ok=False, key="k", path=None, diagnostics=(Diagnostic("error", "no builds here"),))

    set_builder(refusing)
    with prebuilt({BuildRequest(KERNELS): str(saved)}):
        assert load(KERNELS, SIGNATURES).path == str(saved)  # served, never built
        with pytest.raises(BuildError, match="no builds here"):
            load(other, {"one": "void(float*)"})  # any other request goes to the builder in place before
    assert [r.source for r in asked] == [other]
    with prebuilt({}), pytest.raises(BuildError, match="no builds here"):
        load(other, {"one": "void(float*)"})  # nothing to serve: the builder in place answers
    with pytest.raises(BuildError, match="no builds here"):
        load(KERNELS, SIGNATURES)  # outside, the saved library is not served
