"""The gate's static rules: what candidates may and may not write."""

from __future__ import annotations

import pytest

from kernelkiln.guard import gate
from kernelkiln.task import bundled_suites

OK = """
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from kernelkiln import native

class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)
        self._cache = None

    def forward(self, x):
        w = self.linear.weight
        return F.relu(x) * math.sqrt(2.0) + w.sum()
"""


def messages(source: str, forbidden=()) -> list[str]:
    return [i.message for i in gate.check(source, forbidden)]


def test_an_ordinary_candidate_passes():
    assert messages(OK, {"softmax"}) == []


@pytest.mark.parametrize(
    "snippet, message",
    [
        ("import os", "import of 'os'"),
        ("import collections", "import of 'collections'"),  # collections.abc is allowed, not its parent
        ("import numpy as np", "import of 'numpy'"),
        ("import torch.utils.cpp_extension", "import of 'torch.utils.cpp_extension'"),
        ("from kernelkiln.native import set_builder", "not available to candidates"),
        ("from kernelkiln import native\nnative.set_builder(None)", "not available to candidates"),
        ("from . import x", "import of"),
        ("x = eval('1')", "use of 'eval'"),
        ("x = __builtins__", "access to '__builtins__'"),
        ("import torch\nx = torch._C", "private torch._C"),
        ("import torch\ntorch.load('f')", "torch.load is not allowed"),
        ("import torch\nx = torch.ops.aten.softmax", "torch.ops is not allowed"),
        ("import torch.nn.functional as F\nF.gelu = None", "monkeypatching torch.nn.functional"),
        ("import math\nmath.pi += 1", "monkeypatching math"),
        ("def f():\n    global g", "global statements"),
    ],
)
def test_dangerous_constructs_are_refused(snippet, message):
    found = messages(snippet + "\nclass ModelNew:\n    pass\n")
    assert any(message in m for m in found), found


def test_abstract_base_classes_may_be_imported_as_swin_does():
    uses = "isinstance(x, collections.abc.Iterable) or isinstance(x, Iterable) or isinstance(x, cabc.Sized)"
    src = (
        "import collections.abc\nimport collections.abc as cabc\nfrom collections.abc import Iterable\n"
        f"def f(x):\n    return {uses}\nclass ModelNew:\n    pass\n"
    )
    assert messages(src) == []


@pytest.mark.parametrize(
    "snippet",
    [
        "import collections.abc\nx = collections.OrderedDict",
        "import collections.abc\nx = collections.abc.sys",  # what the module imported: sys, and from it os
        "import collections.abc\nm = collections.abc\nx = m.sys",
        "import collections.abc\nm = collections\nx = m.abc.sys",
        "import collections.abc as cabc\nx = cabc.sys",
        "import collections.abc as cabc\nx = getattr(cabc, 'sys')",
        "from collections.abc import sys",
        "from collections.abc import *",
        "import collections.abc\nx = collections.abc.Iterable.register(eval('1'))",  # what follows is judged too
    ],
)
def test_nothing_but_the_base_classes_of_collections_abc_is_reachable(snippet):
    assert messages(snippet + "\nclass ModelNew:\n    pass\n")


def test_reference_ops_are_refused_in_any_spelling():
    src = "import torch\nfrom torch.nn.functional import softmax\nclass ModelNew:\n    def f(self, x, w):\n{}\n"
    assert (
        "calls the reference op 'softmax'" in messages(src.format("        return torch.softmax(x, 1)"), {"softmax"})[0]
    )
    assert messages(src.format("        return x.softmax(1)"), {"softmax"})
    assert messages(src.format("        return softmax(x, 1)"), {"softmax"})
    assert "@ operator" in messages(src.format("        return x @ w"), {"matmul"})[0]
    assert messages(src.format("        return x @ w"), set()) == []


def test_imported_reference_ops_are_refused_under_another_name_and_in_place():
    src = "import torch\nfrom torch import relu as r\nclass ModelNew:\n    def f(self, x):\n{}\n"
    assert "calls the reference op 'relu'" in messages(src.format("        return r(x)"), {"relu"})[0]
    assert "calls the reference op 'relu_'" in messages(src.format("        return x.relu_()"), {"relu"})[0]


NATIVE = """
import torch
import torch.nn as nn
import kernelkiln.native
from kernelkiln import native
from kernelkiln import native as kn
from kernelkiln.native import load
from kernelkiln.native import load as build

lib = native.load("...", {{"relu": "void(const float*, float*, int64_t)"}})
other = {loader}("...", {{"matmul": "void(void)"}})

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x, y, x.numel())
        other.matmul()
        return y
{extra}"""


@pytest.mark.parametrize("loader", ["native.load", "kn.load", "load", "build", "kernelkiln.native.load"])
def test_functions_of_a_native_library_the_candidate_loaded_may_be_named_like_reference_ops(loader):
    found = messages(NATIVE.format(loader=loader, extra=""), {"relu", "matmul"})
    assert not any("reference op" in m for m in found), found
    if loader != "kernelkiln.native.load":  # that spelling is refused for itself (kernelkiln.native.native)
        assert found == []


@pytest.mark.parametrize(
    "extra",
    [
        "lib = torch",  # the same name bound to torch elsewhere
        "def g(lib):\n    return lib.relu(1)",  # a parameter of that name
        "for lib in [torch]:\n    pass",
        "import torch as lib",
    ],
)
def test_a_name_also_bound_to_something_else_gets_no_native_exemption(extra):
    found = messages(NATIVE.format(loader="native.load", extra=extra), {"relu", "matmul"})
    assert any("calls the reference op 'relu'" in m for m in found), found


@pytest.mark.parametrize("loader", ["torch.load", "nn.load", "native.build"])
def test_only_kernelkiln_native_load_makes_a_native_library(loader):
    found = messages(NATIVE.format(loader=loader, extra=""), {"relu", "matmul"})
    assert any("calls the reference op 'matmul'" in m for m in found), found


def test_a_rebound_loader_makes_no_native_library():
    found = messages(NATIVE.format(loader="native.load", extra="native = torch"), {"relu", "matmul"})
    assert any("calls the reference op 'relu'" in m for m in found), found


def test_submodules_named_like_ops_are_not_calls():
    src = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def f(self, x):\n        return self.linear.weight\n"
    assert messages(src, {"linear"}) == []


def test_syntax_errors_and_missing_model_new_are_reported_with_lines():
    [issue] = gate.check("def f(:\n")
    assert issue.message.startswith("syntax error") and issue.line == 1
    assert messages("x = 1\n") == ["defines no top-level class ModelNew"]


TRITON_OK = """
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton import language as tl2

@triton.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, tl2.exp(x) + tl.math.rsqrt(x) + tl.extra.cuda.libdevice.tanh(x), mask=offs < n)

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        kernel[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=triton.next_power_of_2(64))
        return y
"""


def test_triton_kernels_their_language_and_launches_pass():
    assert messages(TRITON_OK, {"softmax"}) == []


def test_the_bundled_triton_seeds_pass():
    seeds = sorted((bundled_suites()["examples"].path / "seeds").glob("*_triton.py"))
    assert seeds
    for seed in seeds:
        assert messages(seed.read_text(), {"softmax", "layer_norm", "matmul"}) == [], seed.name


@pytest.mark.parametrize(
    "snippet, message",
    [
        ("import triton.runtime", "import of 'triton.runtime'"),
        ("from triton import runtime", "triton.runtime is not available"),
        ("from triton.compiler import compile", "triton.compiler is not available"),
        ("import triton\nx = triton.testing.do_bench", "triton.testing is not available"),
        ("import triton\nx = triton.tools", "triton.tools is not available"),
        ("import triton\nx = triton.backends", "triton.backends is not available"),
        ("import triton\nx = triton.autotune", "triton.autotune is not available"),
        ("import triton\nx = triton.knobs.cache", "triton.knobs is not available"),
        ("import triton.language as tl\nx = tl.core.builtins.open", "triton.language.core is not available"),
        ("import triton.language as tl\nx = tl.extra.pkgutil", "triton.language.extra.pkgutil is not available"),
        ("from triton.language import *", "import of '*'"),
        ("from triton import jit\nx = jit.cache", "triton.jit.cache is not allowed"),
        ("import triton\n@triton.jit\ndef k(x):\n    pass\nx = k.cache", "k.cache is not allowed"),
        ("import triton\n@triton.jit\ndef k(x):\n    pass\nf = k\nx = f.compile", "access to .compile is not allowed"),
        ("import triton.language as tl\ns = tl.sum\nx = s.get_capture_scope()", "access to .get_capture_scope"),
        ("import triton.language as tl\nx = tl.sum._do_compile", "access to private triton.language._do_compile"),
        ("import triton.language as tl\nx = tl.load(1).handle.data", "access to .handle is not allowed"),
        ("import torch\nx = torch.ones(2).numpy().tofile('f')", "access to .tofile is not allowed"),
        ("import torch\ns = torch.cuda.Stream()", "torch.cuda is not available on the cpu platform"),
    ],
)
def test_triton_beyond_kernels_and_device_apis_on_cpu_are_refused(snippet, message):
    found = messages(snippet + "\nclass ModelNew:\n    pass\n")
    assert any(message in m for m in found), found


def test_device_apis_pass_on_the_cuda_platform():
    source = "import torch\ns = torch.cuda.Stream()\nclass ModelNew:\n    pass\n"
    assert [i.message for i in gate.check(source, (), "cuda")] == []


# A copied reference's __init__ may compute with a reference op (SwinV2's logit scale): nothing that could run
# such a call on forward's data is allowed.
_BUILT = """
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, heads):
        super(Attention, self).__init__()
        self.scale = nn.Parameter(torch.log(10 * torch.ones((heads, 1, 1))))
        self.blocks = nn.ModuleList([Block() for _ in range(2)])


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.log(torch.arange(1.0, 5.0))


class ModelNew(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.attention = Attention(heads)

    def forward(self, x):
        {forward}
"""


def test_a_reference_op_called_in_an_init_only_construction_runs_is_allowed():
    assert messages(_BUILT.format(forward="return x * self.attention.scale"), ("log", "mul")) == []


@pytest.mark.parametrize(
    "forward",
    [
        "return Attention(x).scale",  # the class built on forward's data
        "return Block.__init__(self) or x",  # an __init__ reached outside construction
        "self.attention.__init__(x)\n        return x",
        "return ModelNew(x).attention.scale",
        "return torch.log(x)",
    ],
)
def test_a_reference_op_in_an_init_that_forward_could_run_is_refused(forward):
    assert "calls the reference op 'log' (reimplement it instead)" in messages(_BUILT.format(forward=forward), ("log",))


@pytest.mark.parametrize(
    "init",
    [
        "self.f = torch.log",  # not called there: a function kept for later
        "self.f = lambda t: torch.log(t)",
        "self.g = (torch.log(t) for t in [])",
        "def f(t):\n            return torch.log(t)\n        self.f = f",
    ],
)
def test_a_reference_op_an_init_keeps_for_later_is_refused(init):
    source = _BUILT.format(forward="return x").replace("        self.attention = Attention(heads)", f"        {init}")
    assert "calls the reference op 'log' (reimplement it instead)" in messages(source, ("log",))


def test_a_subclass_built_in_forward_makes_its_base_s_init_refused():
    source = _BUILT.format(forward="return Sub(1).scale") + "\n\nclass Sub(Attention):\n    pass\n"
    assert "calls the reference op 'log' (reimplement it instead)" in messages(source, ("log",))


def test_a_classmethod_that_could_build_its_class_on_forward_s_data_makes_every_init_refused():
    source = _BUILT.format(forward="return self.make(x)").replace(
        "class ModelNew(nn.Module):",
        "class ModelNew(nn.Module):\n    @classmethod\n    def make(cls, x):\n        return cls(x)\n",
    )
    assert "calls the reference op 'log' (reimplement it instead)" in messages(source, ("log",))


def test_an_attribute_of_the_class_read_in_forward_builds_nothing():
    source = _BUILT.format(forward="ModelNew.calls = 1\n        return x")
    assert messages(source, ("log",)) == []
