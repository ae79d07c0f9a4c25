"""The gate on KernelBench's candidate forms: load_inline is let through, other toolchains are named."""

from __future__ import annotations

import pytest

from kernelkiln.guard import gate
from kernelkiln.testing.candidates import CANDIDATES

HEAD = "import torch\nimport torch.nn as nn\n"
TAIL = "\n\nclass ModelNew(nn.Module):\n    pass\n"


def messages(body: str, platform: str = "cpu", forbidden=()) -> list[str]:
    return [i.message for i in gate.check(HEAD + body + TAIL, forbidden, platform)]


def test_a_kernelbench_load_inline_candidate_passes_even_when_its_library_is_named_like_the_reference_op():
    source = (CANDIDATES / "relu_load_inline.py").read_text()
    assert gate.check(source, {"relu"}) == []


@pytest.mark.parametrize(
    "body",
    [
        "from torch.utils.cpp_extension import load_inline\next = load_inline('e', 'int f();')",
        "from torch.utils.cpp_extension import load_inline as build\next = build('e', 'int f();')",
        "from torch.utils.cpp_extension import load_inline\next = torch.utils.cpp_extension.load_inline('e', 'x')",
    ],
)
def test_load_inline_is_allowed_by_name_or_spelled_out(body):
    assert messages(body) == []


@pytest.mark.parametrize(
    "body, message",
    [
        ("from torch.utils.cpp_extension import load", "torch.utils.cpp_extension.load is not available"),
        ("from torch.utils.cpp_extension import BuildExtension", "BuildExtension is not available"),
        ("x = torch.utils.cpp_extension.load('e', [])", "torch.utils.cpp_extension.load is not available"),
        ("import torch.utils.cpp_extension", "import of 'torch.utils.cpp_extension' is not allowed"),
        ("x = torch.utils.cpp_extension", "torch.utils is not allowed"),
        ("from torch.utils import cpp_extension", "import of 'torch.utils.cpp_extension' is not allowed"),
    ],
)
def test_the_rest_of_cpp_extension_is_refused(body, message):
    assert any(message in m for m in messages(body)), messages(body)


CUDA_CALL = "from torch.utils.cpp_extension import load_inline\next = load_inline('e', 'int f();', cuda_sources=SRC)"


def test_cuda_sources_need_a_gpu_on_the_cpu_platform_and_are_not_built_yet_on_cuda():
    assert any("needs a CUDA GPU" in m for m in messages("SRC = 'x'\n" + CUDA_CALL))
    assert any("not built by kernelkiln yet" in m for m in messages("SRC = 'x'\n" + CUDA_CALL, platform="cuda"))
    assert messages("from torch.utils.cpp_extension import load_inline\next = load_inline('e', 'x', None)") == []


@pytest.mark.parametrize(
    "body, needs",
    [
        ("import cutlass\nimport cutlass.cute as cute", "CuTe DSL"),
        ("import tilelang.language as T", "TileLang"),
        ("SRC = '#include \"kittens.cuh\"'", "ThunderKittens"),
        ("SRC = 'hipcc'", "HIP"),
    ],
)
def test_a_candidate_for_another_toolchain_gets_one_line_naming_what_it_needs(body, needs):
    found = messages(body)
    assert len(found) == 1 and needs in found[0] and "kernelkiln does not build it" in found[0]


def test_a_cutlass_include_in_a_source_string_is_not_taken_for_the_cute_dsl():
    assert not any("CuTe" in m for m in messages("SRC = '#include <cutlass/gemm.h>'"))
