"""Tests for kernelkiln.native.inline: torch's load_inline call, built confined and cached like any native build."""

from __future__ import annotations

import ast
import importlib
import shutil

import pytest
import torch

from kernelkiln.native import BuildError, BuildRequest, InlineError, cache_key, load_inline
from kernelkiln.native import extension as extension_module
from kernelkiln.native.extension import extension_problem
from kernelkiln.native.inline import inline_source
from kernelkiln.testing.candidates import CANDIDATES

pytestmark = [
    pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="no C++ compiler"),
    pytest.mark.skipif(extension_problem() is not None, reason=f"no torch extensions here: {extension_problem()}"),
]


def plain_module(name: str, value: int) -> str:
    """A CPython extension without torch's headers: the same path as a torch one, built in a second."""
    return f"""
#include <Python.h>
static PyObject* answer(PyObject*, PyObject*) {{ return PyLong_FromLong({value}); }}
static PyMethodDef methods[] = {{{{"answer", answer, METH_NOARGS, ""}}, {{nullptr, nullptr, 0, nullptr}}}};
static PyModuleDef definition = {{PyModuleDef_HEAD_INIT, "{name}", "", -1, methods}};
PyMODINIT_FUNC PyInit_{name}() {{ return PyModule_Create(&definition); }}
"""


def test_the_main_cpp_is_the_one_torch_writes():
    text = inline_source(["int a();", "int a() { return 1; }"], ["a"])
    assert text.splitlines() == [
        "#include <torch/extension.h>",
        "int a();",
        "int a() { return 1; }",
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {",
        'm.def("a", torch::wrap_pybind_function(a), "a");',
        "}",
    ]
    bare = inline_source("int a();", {"a": "doc"}, with_pytorch_error_handling=False, no_implicit_headers=True)
    assert bare.splitlines() == ["int a();", "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {", 'm.def("a", a, "doc");', "}"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"name": "not-a-name"}, "not a Python identifier"),
        ({"extra_cflags": ["-fplugin=/tmp/x.so"]}, "-fplugin"),
        ({"extra_ldflags": ["-Wl,-rpath,/tmp"]}, "-Wl"),
        ({"extra_include_paths": ["/root"]}, "name files"),
        ({"build_directory": "/tmp/x"}, "name files"),
        ({"cuda_sources": "__global__ void k() {}"}, "CUDA sources are not built"),
        ({"functions": ["a b"]}, r"not a C\+\+ identifier"),
        ({"functions": {"a": 'x"); system("id'}}, "docstring"),
        ({"is_python_module": False}, "is_python_module"),
        ({"sycl_sources": "x"}, "sycl_sources not supported"),
    ],
)
def test_calls_outside_what_is_built_are_refused_in_one_line_before_any_compile(kwargs, message):
    arguments = {"name": "ext", "cpp_sources": "int a() { return 1; }", **kwargs}
    with pytest.raises(InlineError, match=message) as raised:
        load_inline(**arguments)
    assert "\n" not in str(raised.value)


def test_empty_flags_as_kernelbench_writes_them_are_dropped(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    module = load_inline(
        "flagged", plain_module("flagged", 7), extra_cflags=["", "-O2"], extra_ldflags=[""], no_implicit_headers=True
    )
    assert module.answer() == 7


def test_a_second_source_under_the_same_name_gets_its_own_module_never_the_stale_one(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    first = load_inline("twice", plain_module("twice", 1), no_implicit_headers=True)
    second = load_inline("twice", plain_module("twice", 2), no_implicit_headers=True)
    again = load_inline("twice", plain_module("twice", 1), no_implicit_headers=True)
    assert (first.answer(), second.answer()) == (1, 2)
    assert again is first  # the cached library, initialised once in this process


def test_the_cache_key_covers_the_name_the_flags_and_the_torch_build(monkeypatch):
    request = BuildRequest(source="int a();", lang="c++", flags=("-O2",), module="ext")
    key = cache_key(request)
    assert key != cache_key(BuildRequest(source="int a();", lang="c++", flags=("-O2",), module="other"))
    assert key != cache_key(BuildRequest(source="int a();", lang="c++", flags=("-O3",), module="ext"))
    assert key != cache_key(BuildRequest(source="int a();", lang="c++", flags=("-O2",)))  # a ctypes library
    other_torch = {**extension_module.extension_identity(), "torch": "0.0.0"}
    monkeypatch.setattr(importlib.import_module("kernelkiln.native.build"), "extension_identity", lambda: other_torch)
    assert cache_key(request) != key


def test_a_compile_error_is_a_build_error_with_the_compilers_words(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    with pytest.raises(BuildError, match=r"main\.cpp:1"):
        load_inline("broken", "int a( {", no_implicit_headers=True)


def test_a_kernelbench_style_extension_builds_against_torch_and_runs_on_tensors():
    # The bundled KernelBench-form candidate's own call, so the guard's tests reuse this build:
    # torch's headers take half a minute to compile once, nothing after (the default cache).
    tree = ast.parse((CANDIDATES / "relu_load_inline.py").read_text())
    text = {t.id: ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
            if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)}  # fmt: skip
    module = load_inline(
        name="relu",
        cpp_sources=[text["relu_cpp_source"], text["relu_source"]],
        functions=["relu_cpu"],
        verbose=True,
        extra_cflags=["-O3"],
        extra_ldflags=[""],
    )
    x = torch.randn(3, 5)
    assert torch.equal(module.relu_cpu(x), torch.relu(x))
