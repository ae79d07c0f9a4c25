"""A generated candidate as the rest of kernelkiln sees it: per-workload dispatch, refusals, the gate, the guard."""

from __future__ import annotations

import ast

import pytest
import torch

from kernelkiln.guard import GuardSession, gate
from kernelkiln.guard.reference_ops import forbidden_ops, record
from kernelkiln.lowering import Unsupported, generate
from kernelkiln.task import load_task
from kernelkiln.testing.guard import fast_config
from kernelkiln.testing.lowering import mismatch, run_candidate, write_task

S2 = {"B": 37, "N": 203}
R2 = "[torch.randn(B, N)]"
TWO = {"workloads": [{"name": "wide", "B": 37, "N": 203}, {"name": "narrow", "B": 8, "N": 129}]}


def test_each_kiln_workload_gets_its_own_correct_kernel(tmp_path):
    task = write_task(
        tmp_path,
        "task",
        "torch.softmax(x, dim=1) * self.w",
        S2,
        R2,
        init="[N]",
        args="n",
        init_body="self.w = nn.Parameter(torch.randn(n))",
        kiln=TWO,
    )
    generated = generate(task)
    namespace = run_candidate(generated.source)
    assert sorted(namespace["WORKLOADS"]) == [((8, 129),), ((37, 203),)]
    for workload in task.workloads:
        assert mismatch(task, generated.source, workload, namespace=namespace) is None, workload.name


def test_the_candidate_refuses_an_input_shape_it_was_not_generated_for(tmp_path):
    task = write_task(tmp_path, "task", "torch.relu(x) + 1", S2, R2, kiln=TWO)
    namespace = run_candidate(generate(task).source)
    model = task.make_model(task.workloads[0], 0, namespace["ModelNew"])
    with pytest.raises(ValueError, match="generated for input shapes") as raised:
        model(torch.randn(5, 7))
    message = str(raised.value)
    assert "(37, 203)" in message and "(8, 129)" in message and "(5, 7)" in message


def _unsupported(tmp_path, forward: str, inputs: str = R2, **options) -> str:
    task = write_task(tmp_path, "task", forward, S2, inputs, **options)
    with pytest.raises(Unsupported) as raised:
        generate(task)
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_an_op_without_a_lowering_is_refused_naming_it(tmp_path):
    assert "aten.gcd" in _unsupported(tmp_path, "torch.gcd(x, x)", "[torch.randint(0, 9, (B, N))]")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_half_precision_input_is_refused_naming_its_dtype(tmp_path, dtype):
    assert dtype in _unsupported(tmp_path, "torch.relu(x)", f"[torch.randn(B, N).to(torch.{dtype})]")


def _forbidden(task) -> frozenset[str]:
    """The ops the guard forbids a candidate for ``task`` (the reference's own, as GuardSession computes them)."""
    w = task.workloads[0]
    return forbidden_ops(record(task.make_model(w, 0), task.make_inputs(w, 0)), task.forbidden_ops, task.allowed_ops)


@pytest.mark.parametrize("forward", ["torch.softmax(x, dim=1)", "self.ln(x)"], ids=["softmax", "layer_norm_module"])
def test_the_generated_source_passes_the_guard_s_static_gate(tmp_path, forward):
    task = write_task(tmp_path, "task", forward, S2, R2, init="[N]", args="n", init_body="self.ln = nn.LayerNorm(n)")
    source = generate(task).source
    forbidden = _forbidden(task)
    assert "softmax" in forbidden or "layer_norm" in forbidden  # the gate is checking something
    assert gate.check(source, forbidden, "cpu") == []
    # The same file calling the reference's op in forward is refused: the gate is not blind to it.
    cheat = source.replace(
        "        key = tuple(",
        "        torch.softmax(inputs[0], dim=1)\n"
        "        torch.layer_norm(inputs[0], (inputs[0].shape[1],))\n"
        "        key = tuple(",
        1,
    )
    assert cheat != source and gate.check(cheat, forbidden, "cpu")


@pytest.mark.slow
def test_the_guard_judges_a_generated_layer_norm_candidate_correct(tmp_path):
    task = write_task(
        tmp_path,
        "task",
        "F.gelu(self.ln(x))",
        S2,
        R2,
        init="[N]",
        args="n",
        init_body="self.ln = nn.LayerNorm(n)\nwith torch.no_grad():\n    self.ln.weight.normal_()",
    )
    config = fast_config()
    source = generate(task, threads=config.threads).source
    with GuardSession(task, config) as guard:
        verdict = guard.evaluate(source, timed=False)  # correctness only: timing here is noise
    assert verdict.verdict != "REJECT", verdict.reason
    assert verdict.correct, verdict.reason


def _top_level(source: str) -> tuple[list[str], list[str]]:
    """The candidate's top-level imports, one per imported name, and the names its top-level assignments bind."""
    imports, assigned = [], []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            imports += [ast.unparse(ast.Import([alias])) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            imports += [ast.unparse(ast.ImportFrom(node.module, [alias], node.level)) for alias in node.names]
        elif isinstance(node, ast.Assign):
            assigned += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return imports, assigned


def test_a_number_among_forward_s_arguments_is_baked_in_and_dispatched_on(tmp_path):
    # KernelBench's 5_Matrix_scalar_multiplication: forward(A, s) with s = 3.14 from get_inputs.
    task = write_task(tmp_path, "task", "A * s + 1", S2, "[torch.randn(B, N), 3.14]", signature="A, s")
    source = generate(task).source
    assert mismatch(task, source) is None
    model = task.make_model(task.workloads[0], 0, run_candidate(source)["ModelNew"])
    with pytest.raises(ValueError, match="generated for input shapes"):
        model(torch.randn(37, 203), 2.0)  # another value is another computation: refused, never wrong
    config = fast_config()
    with GuardSession(task, config) as guard:  # the guard passes the number again when it reruns the candidate
        verdict = guard.evaluate(generate(task, threads=config.threads).source, timed=False)
    assert verdict.correct, verdict.reason


def test_the_candidate_imports_each_name_once_and_assigns_each_set_size_once(tmp_path):
    # The task file imports torch, torch.nn and torch.nn.functional, as the candidate's own header does.
    task = write_task(tmp_path, "task", "F.relu(x) * N", S2, R2, overrides={"B": 16})
    source = generate(task).source
    imports, assigned = _top_level(source)
    assert "import torch" in imports and "import torch.nn.functional as F" in imports
    assert sorted(imports) == sorted(set(imports))
    assert assigned.count("B") == assigned.count("N") == 1
    assert run_candidate(source)["B"] == 16
    assert mismatch(task, source) is None


def test_a_size_derived_from_a_set_size_follows_it_in_the_candidate(tmp_path):
    path = tmp_path / "task.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.w = nn.Parameter(torch.randn(*SHAPE))\n\n"
        "    def forward(self, x):\n"
        "        return x * self.w\n\n"
        "B = 37\nN = 203\nSHAPE = (1, N)\n\n"
        "def get_inputs():\n    return [torch.randn(B, N)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    task = load_task(path, {"N": 64})
    source = generate(task).source
    _, assigned = _top_level(source)
    assert assigned.count("N") == assigned.count("SHAPE") == 1
    assert run_candidate(source)["SHAPE"] == (1, 64)
    assert mismatch(task, source) is None


def test_methods_the_reference_s_init_calls_are_copied_and_forward_s_helpers_and_lambdas_are_not(tmp_path):
    # ResNet's _make_layer, EfficientNet's _make_mbconv_block: __init__ builds its layers through them.
    path = tmp_path / "task.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.body = self._make_layer(N)\n"
        "        self.mlpf = lambda x: torch.tanh(self.body(x))  # minGPT's block: left out, it holds nothing\n\n"
        "    def _make_layer(self, n):\n"
        "        return nn.Sequential(self._block(n), nn.ReLU())\n\n"
        "    def _block(self, n):\n"
        "        return nn.Linear(n, n)\n\n"
        "    def _act(self, x):\n"
        "        return torch.tanh(x)\n\n"
        "    def forward(self, x):\n"
        "        return self._act(self.body(x))\n\n"
        "B = 8\nN = 32\n\n"
        "def get_inputs():\n    return [torch.randn(B, N)]\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    task = load_task(path)
    source = generate(task).source
    model = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Model")
    assert {n.name for n in model.body if isinstance(n, ast.FunctionDef)} == {"__init__", "_make_layer", "_block"}
    assert not any(isinstance(n, ast.Lambda) for n in ast.walk(model))
    assert gate.check(source, _forbidden(task), "cpu") == []  # tanh stays in forward's helper, not copied
    assert mismatch(task, source) is None


# -- known bugs ----------------------------------------------------------------------------
def test_a_reference_whose_init_reads_a_size_variable_follows_the_overridden_size(tmp_path):
    task = write_task(
        tmp_path,
        "task",
        "x * self.w",
        S2,
        R2,
        overrides={"N": 64},
        init_body="self.w = nn.Parameter(torch.arange(N, dtype=torch.float32) / N)",
    )
    assert mismatch(task, generate(task).source) is None


SWIN_LIKE = """import collections
import numpy as np
import torch
import torch.nn as nn
from itertools import repeat


def _ntuple(n):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))
    return parse


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.scale = float(np.log2(8)) / np.sqrt(n)
        self.size = _ntuple(2)(n)
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        return self.lin(x) * self.scale


B = 8
N = 16


def get_inputs():
    return [torch.randn(B, N)]


def get_init_inputs():
    return [N]
"""


def test_a_reference_s_numpy_scalar_math_and_collections_abc_are_copied_in_forms_the_gate_allows(tmp_path):
    # KernelBench level 3's 30_SwinTransformerV2: np.log2(8) in a Model's __init__, collections.abc in to_2tuple.
    path = tmp_path / "task.py"
    path.write_text(SWIN_LIKE)
    task = load_task(path)
    source = generate(task).source
    assert "numpy" not in source and "np." not in source and "math.log2(8)" in source and "math.sqrt(n)" in source
    assert "import collections.abc" in source
    assert gate.check(source, _forbidden(task), "cpu") == []


def test_a_reference_using_numpy_beyond_scalar_math_is_refused_naming_it(tmp_path):
    path = tmp_path / "task.py"
    path.write_text(SWIN_LIKE.replace("np.sqrt(n)", "np.prod(np.ones(n))"))
    with pytest.raises(Unsupported, match=r"the reference's numpy \(np\.ones, np\.prod\), which a candidate may not"):
        generate(load_task(path))


def _bundled_tasks() -> list:
    from kernelkiln.task import bundled_suites

    return sorted({p for suite in bundled_suites().values() for p in suite.task_paths()})


@pytest.mark.parametrize("path", _bundled_tasks(), ids=lambda p: p.stem)
def test_every_bundled_task_s_generated_candidate_passes_the_gate_by_construction(path):
    task = load_task(path)
    try:
        source = generate(task).source
    except Unsupported:
        pytest.skip("no lowering for it")
    assert gate.check(source, _forbidden(task), "cpu") == []


def test_an_import_only_the_reference_s_forward_uses_is_not_copied(tmp_path):
    task = write_task(tmp_path, "task", "x * json.loads('2.5')", S2, R2)
    task.path.write_text("import json\n" + task.path.read_text())
    task = load_task(task.path)
    source = generate(task).source
    assert "import json" not in source and gate.check(source, _forbidden(task), "cpu") == []
    assert mismatch(task, source) is None
